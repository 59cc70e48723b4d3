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

/**
 * A `{{` and what follows up to `}}` (with a brace before it: `{{{x}}}`), or a `{{` that no `}}`
 * closes: each must be exactly one variable as VARIABLE spells it (blanks inside allowed). Single
 * braces (`{x}`, CSS) and a `}}` on its own stay text.
 */
const BRACES = /\{?\{\{[^{}]*\}\}|\{\{/g;
const ONE_VARIABLE = /^\{\{\s*([A-Za-z0-9_.]+)\s*\}\}$/;

/** The name of the one variable a template is, blanks around allowed (an email's `to`); null for other text. */
export function soleVariable(template: string): string | null {
  return ONE_VARIABLE.exec(template.trim())?.[1] ?? null;
}

/**
 * Unknown and malformed variables of a template, as 422 details under `key` (checked when an
 * automation is configured): a `{{…}}` that is no variable would be sent as it stands.
 */
export function templateProblems(template: string, entity: EntityDef, key: string): ValidationDetail[] {
  const malformed = [...new Set([...template.matchAll(BRACES)].map((match) => match[0]))]
    .filter((piece) => !ONE_VARIABLE.test(piece))
    .map((piece) => ({
      key,
      reason: 'invalid_format',
      message: `${piece.length > 60 ? `${piece.slice(0, 60)}…` : piece} is no variable: write {{field_key}} (letters, digits, _ and .)`,
    }));
  return malformed.concat(
    variablesOf(template)
      .filter((name) => !(SYSTEM_VARIABLES as readonly string[]).includes(name))
      .filter((name) => !entity.fields.some((field) => field.key === name))
      .map((name) => ({
        key,
        reason: 'unknown_field',
        message: `{{${name}}} names no field of ${entity.key}`,
      })),
  );
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

type HtmlToText = typeof import('html-to-text');
/** Loaded with the first HTML email, not with the service (most never send one). */
let htmlToText: Promise<HtmlToText> | undefined;
const HEADINGS = ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((selector) => ({
  selector,
  options: { uppercase: false },
}));

/**
 * The text part of an HTML email: paragraphs and blocks apart by blank lines, lists as `* item`,
 * links as `text [href]` (so that a text-only reader keeps a record token's link), images left
 * out, no wrapping (the mail composer encodes long lines), entities decoded.
 */
export async function textOfHtml(html: string): Promise<string> {
  htmlToText ??= import('html-to-text');
  const { convert } = await htmlToText;
  return convert(html, {
    wordwrap: false,
    selectors: [
      { selector: 'a', options: { hideLinkHrefIfSameAsText: true } },
      { selector: 'img', format: 'skip' },
      ...HEADINGS,
    ],
  });
}
