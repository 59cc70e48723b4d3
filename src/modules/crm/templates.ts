import type { ValidationDetail } from '../../http/errors.ts';
import { escapeHtml } from '../../lib/text.ts';
import type { EntityDef } from '../entities/entities.model.ts';

/** `{{field_key}}`, `{{record.id}}`, `{{stage}}`, `{{record_token}}` (decisions §7). */
const VARIABLE = /\{\{\s*([A-Za-z0-9_.]+)\s*\}\}/g;
export const SYSTEM_VARIABLES = ['record.id', 'stage', 'record_token'] as const;

/** The variables a template names. */
export function variablesOf(template: string): string[] {
  return [...template.matchAll(VARIABLE)].map((match) => match[1]!);
}

/** Unknown variables of a template, as 422 details under `key` (checked when an automation is configured). */
export function templateProblems(template: string, entity: EntityDef, key: string): ValidationDetail[] {
  return variablesOf(template)
    .filter((name) => !(SYSTEM_VARIABLES as readonly string[]).includes(name))
    .filter((name) => !entity.fields.some((field) => field.key === name))
    .map((name) => ({
      key,
      reason: 'unknown_field',
      message: `{{${name}}} names no field of ${entity.key}`,
    }));
}

/** A body with markup is sent as HTML (its values escaped), with a text part beside it. */
export function looksLikeHtml(template: string): boolean {
  return /<[a-z][a-z0-9]*[\s>/]/i.test(template);
}

/** A value as text: lists joined by commas, nothing for no value. */
export function textOf(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (Array.isArray(value)) return value.map(textOf).join(', ');
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

export function render(template: string, values: Record<string, string>, html = false): string {
  return template.replace(VARIABLE, (_, name: string) => {
    const value = values[name] ?? '';
    return html ? escapeHtml(value) : value;
  });
}
