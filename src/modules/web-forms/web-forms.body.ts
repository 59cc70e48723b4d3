import type { ValidationDetail } from '../../http/errors.ts';
import { longerThan } from '../../lib/text.ts';
import type { S2RecordBody } from '../intake/intake.handover.ts';
import type { Warning } from '../intake/intake.service.ts';

/**
 * A website form's body as POST /api/v1/in/{token} reads it (decisions §13). Form encodings
 * are flat: `meta[key]` and `fields[key]` fill those objects, every other name is what it is
 * in a JSON body (interface rule 1). The trap field is the sender's business only: it is
 * taken out before the body is read.
 */

type FlatForm = Record<string, string | string[]>;

const BRACKETED = /^(fields|meta)\[([^[\]]+)\]$/;
/** A field key or a `meta` key: at most 100 characters, as JSON's `propertyNames` (decisions §4). */
const NAME_MAX = 100;
/** Nodes of the JSON body that a form cannot spell bare. */
const OBJECT_NODES = new Set(['fields', 'meta']);
const JSON_ONLY_NODES = new Set(['documents', 'crm', 'booking', 'distribution']);

/**
 * What is wrong with a form's names (its text parts' and its file parts'), in the words of the
 * same JSON's refusal: a name, or the key in `fields[…]`/`meta[…]`, over 100 characters
 * (`out_of_range`); a bare node name, which has no form spelling. The form's schema sees flat
 * names only, so it cannot state the first; the second it states, but in the validator's words.
 */
export function formNameProblems(names: Iterable<string>, trapField: string | null): ValidationDetail[] {
  const problems: ValidationDetail[] = [];
  for (const name of names) {
    if (name === trapField) continue;
    const bracketed = BRACKETED.exec(name);
    if (bracketed ? longerThan(bracketed[2]!, NAME_MAX) : longerThan(name, NAME_MAX)) {
      problems.push({
        key: name,
        reason: 'out_of_range',
        message: bracketed
          ? `the key in ${bracketed[1]}[…] must NOT have more than ${NAME_MAX} characters`
          : `the name must NOT have more than ${NAME_MAX} characters`,
      });
    } else if (OBJECT_NODES.has(name)) {
      // `meta: "x"` in JSON is a value of the wrong type: so is a bare `meta=x`.
      problems.push({
        key: name,
        reason: 'invalid_type',
        message: `${name} takes named values: ${name}[name]=…`,
      });
    } else if (JSON_ONLY_NODES.has(name)) {
      problems.push({
        key: name,
        reason: 'not_allowed',
        message: `${name} is not taken from a form: send the body as JSON`,
      });
    }
  }
  return problems;
}

/** The record body a flat form spells; names stay data (null-prototype objects). */
export function recordBodyOfForm(form: FlatForm, trapField: string | null): S2RecordBody {
  const body: Record<string, unknown> = Object.create(null);
  const nested: Record<'fields' | 'meta', Record<string, unknown> | null> = { fields: null, meta: null };
  for (const name of Object.keys(form)) {
    if (name === trapField) continue;
    const value = form[name];
    const bracketed = BRACKETED.exec(name);
    if (bracketed) {
      const node = bracketed[1] as 'fields' | 'meta';
      nested[node] ??= Object.create(null) as Record<string, unknown>;
      // A form has no null: its empty key field (a hidden input left empty) is JSON's null, no key.
      const noKey = node === 'meta' && bracketed[2] === 'idempotency_key' && value === '';
      nested[node][bracketed[2]!] = noKey ? null : value;
    } else {
      body[name] = value;
    }
  }
  if (nested.fields) body.fields = nested.fields;
  if (nested.meta) body.meta = nested.meta;
  return body as S2RecordBody;
}

/** A JSON body without its trap field (a top-level key of that name). */
export function recordBodyOfJson(json: S2RecordBody, trapField: string | null): S2RecordBody {
  if (trapField === null || !Object.hasOwn(json, trapField)) return json;
  const body: Record<string, unknown> = Object.create(null);
  for (const key of Object.keys(json)) if (key !== trapField) body[key] = json[key];
  return body as S2RecordBody;
}

/** Whether the trap field holds anything: text other than blanks, or any other value. */
export function trapFilled(body: unknown, trapField: string | null): boolean {
  if (trapField === null || body === null || typeof body !== 'object' || !Object.hasOwn(body, trapField)) {
    return false;
  }
  const value = (body as Record<string, unknown>)[trapField];
  const filled = (item: unknown): boolean =>
    typeof item === 'string' ? item.trim() !== '' : item !== null && item !== false && item !== undefined;
  return Array.isArray(value) ? value.some(filled) : filled(value);
}

/** The warnings of file parts a form carried: files are taken by URL only (interface rule 4). */
export function inlineFileWarnings(partNames: string[] | null): Warning[] {
  return (partNames ?? []).map((key) => ({
    key,
    reason: 'inline_file',
    message: 'files are not taken inline; send them as documents with a URL',
  }));
}
