import type { ValidationDetail } from '../../http/errors.ts';
import { longerThan, matchingForm, truncate } from '../../lib/text.ts';
import type { EntityDef, FieldDef } from '../entities/entities.model.ts';

/** Longest text value (decisions §4); textareas take more. */
export const MAX_TEXT_LENGTH = 10_000;
export const MAX_TEXTAREA_LENGTH = 100_000;
export const MAX_NAME_LENGTH = 100;

export type FieldValue = string | number | boolean | string[];

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
/** 5–40 characters, the `+` included. */
const PHONE = /^(?=.{5,40}$)\+?[0-9 ()./-]+$/;
/** At least five digits, wherever they are (tested without a list of them). */
const FIVE_DIGITS = /(?:\d\D*){5}/;
const POSTAL_CODE = /^[A-Za-z0-9][A-Za-z0-9 -]{1,11}$/;
const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const ISO_DATETIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/;

/** Keys compare without case, spaces, underscores and dashes (interface: POST /intake). */
export function normalizeKey(key: string): string {
  return key.toLowerCase().replace(/[\s_-]+/g, '');
}

/** True for values that mean "no value": they are neither stored nor overwrite a stored value. */
export function isEmptyValue(value: unknown): boolean {
  return (
    value === undefined ||
    value === null ||
    (typeof value === 'string' && value.trim() === '') ||
    (Array.isArray(value) && value.length === 0)
  );
}

function ibanIsValid(value: string): boolean {
  const iban = value.replace(/\s+/g, '').toUpperCase();
  if (!/^[A-Z]{2}\d{2}[A-Z0-9]{10,30}$/.test(iban)) return false;
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let remainder = 0;
  for (const char of rearranged) {
    const digits = /\d/.test(char) ? char : String(char.charCodeAt(0) - 55);
    for (const digit of digits) remainder = (remainder * 10 + Number(digit)) % 97;
  }
  return remainder === 1;
}

function isRealDate(year: number, month: number, day: number): boolean {
  // setUTCFullYear, not Date.UTC: Date.UTC reads the years 0–99 as 1900–1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  return (
    year >= 1 &&
    date.getUTCFullYear() === year &&
    date.getUTCMonth() === month - 1 &&
    date.getUTCDate() === day
  );
}

type Coerced = { ok: true; value: FieldValue } | { ok: false; reason: string; message: string };

function invalid(reason: string, message: string): Coerced {
  return { ok: false, reason, message };
}

function asText(value: unknown): string | undefined {
  if (typeof value === 'string') return value.trim();
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value === 'boolean') return String(value);
  return undefined;
}

function coerceText(field: FieldDef, value: unknown): Coerced {
  const text = asText(value);
  if (text === undefined) return invalid('invalid_type', `${field.key} must be text`);
  const limit = field.type === 'textarea' ? MAX_TEXTAREA_LENGTH : MAX_TEXT_LENGTH;
  // Characters are code points (an emoji is one), as the schemas count them.
  if (longerThan(text, limit)) return invalid('too_long', `${field.key} is longer than ${limit} characters`);
  switch (field.format) {
    case 'email':
      return EMAIL.test(text) && text.length <= 254
        ? { ok: true, value: text }
        : invalid('invalid_format', `${field.key} is not an email address`);
    case 'phone':
      return PHONE.test(text) && FIVE_DIGITS.test(text)
        ? { ok: true, value: text }
        : invalid('invalid_format', `${field.key} is not a phone number`);
    case 'url': {
      try {
        const url = new URL(text);
        if (url.protocol === 'http:' || url.protocol === 'https:') return { ok: true, value: text };
      } catch {
        // Not a URL; answered below.
      }
      return invalid('invalid_format', `${field.key} is not an http or https address`);
    }
    case 'postal_code':
      return POSTAL_CODE.test(text)
        ? { ok: true, value: text }
        : invalid('invalid_format', `${field.key} is not a postal code`);
    case 'iban':
      return ibanIsValid(text)
        ? { ok: true, value: text.replace(/\s+/g, '').toUpperCase() }
        : invalid('invalid_format', `${field.key} is not a valid IBAN`);
    default:
      return { ok: true, value: text };
  }
}

function coerceNumber(field: FieldDef, value: unknown): Coerced {
  let number: number | undefined;
  if (typeof value === 'number') number = value;
  else if (typeof value === 'string' && /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/.test(value))
    number = Number(value);
  if (number === undefined || !Number.isFinite(number))
    return invalid('invalid_type', `${field.key} must be a number`);
  if (field.format === 'integer' && !Number.isInteger(number)) {
    return invalid('invalid_format', `${field.key} must be a whole number`);
  }
  // A whole number past 2^53 cannot be kept as sent (9007199254740993 would become …992).
  if (Number.isInteger(number) && !Number.isSafeInteger(number)) {
    return invalid(
      'out_of_range',
      `${field.key} must be a whole number of at most ${Number.MAX_SAFE_INTEGER} either way, or have decimals`,
    );
  }
  return { ok: true, value: number };
}

const TRUE_WORDS = new Set(['true', '1', 'yes', 'on']);
const FALSE_WORDS = new Set(['false', '0', 'no', 'off']);

function coerceBoolean(field: FieldDef, value: unknown): Coerced {
  if (typeof value === 'boolean') return { ok: true, value };
  if (value === 1 || value === 0) return { ok: true, value: value === 1 };
  if (typeof value === 'string') {
    const word = value.trim().toLowerCase();
    if (TRUE_WORDS.has(word)) return { ok: true, value: true };
    if (FALSE_WORDS.has(word)) return { ok: true, value: false };
  }
  return invalid('invalid_type', `${field.key} must be true or false`);
}

function coerceDate(field: FieldDef, value: unknown): Coerced {
  if (typeof value !== 'string') return invalid('invalid_type', `${field.key} must be a date (YYYY-MM-DD)`);
  const text = value.trim();
  // A whole timestamp is cut to its date, but only a real one (no 99:99, no +99:99).
  const timestamp = ISO_DATETIME.test(text);
  const datePart = timestamp ? text.slice(0, 10) : text;
  const match = ISO_DATE.exec(datePart);
  if (
    !match ||
    !isRealDate(Number(match[1]), Number(match[2]), Number(match[3])) ||
    (timestamp && Number.isNaN(Date.parse(text)))
  ) {
    return invalid('invalid_format', `${field.key} must be a date (YYYY-MM-DD)`);
  }
  return { ok: true, value: datePart };
}

function coerceDatetime(field: FieldDef, value: unknown): Coerced {
  if (typeof value !== 'string' || !ISO_DATETIME.test(value.trim())) {
    return invalid('invalid_format', `${field.key} must be an ISO 8601 timestamp with a time zone`);
  }
  const text = value.trim();
  // Date.parse rolls a day the month lacks over into the next month (2026-02-30 is 2 March):
  // the calendar date as written must exist.
  const [year, month, day] = text.slice(0, 10).split('-').map(Number) as [number, number, number];
  const time = Date.parse(text);
  if (Number.isNaN(time) || !isRealDate(year, month, day))
    return invalid('invalid_format', `${field.key} is not a real point in time`);
  const stored = new Date(time).toISOString();
  // In UTC the time must stay within the years 1–9999 (ISO's four digits, as every time here).
  if (!/^\d{4}-/.test(stored) || stored.startsWith('0000'))
    return invalid('out_of_range', `${field.key} must be within the years 1 to 9999 in UTC`);
  return { ok: true, value: stored };
}

/**
 * Each option list's options by their matching form, kept with the list: entity definitions are
 * cached (one array a field until the entity changes), so a long list is put in that form once,
 * not again for every value that is not spelled exactly as an option.
 */
const optionsByForm = new WeakMap<readonly string[], Map<string, string>>();

function matchOption(options: readonly string[], value: string): string | undefined {
  if (options.includes(value)) return value;
  let byForm = optionsByForm.get(options);
  if (byForm === undefined) {
    byForm = new Map();
    // The first option of a form wins, as the list's order had it.
    for (const option of options) {
      const form = matchingForm(option);
      if (!byForm.has(form)) byForm.set(form, option);
    }
    optionsByForm.set(options, byForm);
  }
  return byForm.get(matchingForm(value));
}

function coerceSelect(field: FieldDef, value: unknown): Coerced {
  const options = field.options ?? [];
  const text = asText(value);
  if (text === undefined) return invalid('invalid_type', `${field.key} must be one of the options`);
  const option = matchOption(options, text);
  return option === undefined
    ? invalid('not_allowed', `${field.key} must be one of: ${options.join(', ')}`)
    : { ok: true, value: option };
}

function coerceMultiselect(field: FieldDef, value: unknown): Coerced {
  const options = field.options ?? [];
  const items = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',') : [value];
  const chosen: string[] = [];
  for (const item of items) {
    const text = asText(item);
    if (text === undefined) return invalid('invalid_type', `${field.key} must be a list of options`);
    if (text === '') continue;
    const option = matchOption(options, text);
    if (option === undefined)
      return invalid('not_allowed', `${field.key} values must be among: ${options.join(', ')}`);
    if (!chosen.includes(option)) chosen.push(option);
  }
  return { ok: true, value: chosen };
}

/** Reads one value for its field's type (decisions §3): coerced where unambiguous, else refused. */
export function coerceValue(field: FieldDef, value: unknown): Coerced {
  switch (field.type) {
    case 'text':
    case 'textarea':
      return coerceText(field, value);
    case 'number':
      return coerceNumber(field, value);
    case 'boolean':
      return coerceBoolean(field, value);
    case 'date':
      return coerceDate(field, value);
    case 'datetime':
      return coerceDatetime(field, value);
    case 'select':
      return coerceSelect(field, value);
    case 'multiselect':
      return coerceMultiselect(field, value);
    case 'file':
    case 'files':
      return invalid(
        'invalid_type',
        `${field.key} takes documents: send them in "documents" with "field": "${field.key}"`,
      );
  }
}

/**
 * A submitted value read for its field, or null for no value: empty as sent, or a list of blanks
 * only (`[""]`, `","`), which chose nothing, as an empty list does.
 */
export function readValue(field: FieldDef, raw: unknown): Coerced | null {
  if (isEmptyValue(raw)) return null;
  const coerced = coerceValue(field, raw);
  return coerced.ok && isEmptyValue(coerced.value) ? null : coerced;
}

/**
 * Matchers by entity definition, built once per definition: a changed entity is loaded as a new
 * definition object, never changed in place, so a definition's matcher stays right.
 */
const matchers = new WeakMap<EntityDef, (name: string) => FieldDef | undefined>();

/** Finds the field a submitted name means: its key, or (normalised) its key or label. */
export function createFieldMatcher(entity: EntityDef): (name: string) => FieldDef | undefined {
  const built = matchers.get(entity);
  if (built) return built;
  const byKey = new Map(entity.fields.map((field) => [field.key, field]));
  const byNormalized = new Map<string, FieldDef>();
  for (const field of entity.fields) {
    byNormalized.set(normalizeKey(field.label), field);
  }
  // Keys win over labels when both normalise alike.
  for (const field of entity.fields) byNormalized.set(normalizeKey(field.key), field);
  const match = (name: string) => byKey.get(name) ?? byNormalized.get(normalizeKey(name));
  matchers.set(entity, match);
  return match;
}

export interface ReadValuesResult {
  values: Record<string, FieldValue>;
  problems: ValidationDetail[];
  /** Submitted names that match no field. */
  unmapped: string[];
  /** Submitted names set aside because another name of the submission gives their field. */
  setAside: SetAsideName[];
}

/** A submitted name whose field another name of the same submission gives (`kept`). */
export interface SetAsideName {
  name: string;
  field: string;
  kept: string;
}

/**
 * Names of one submission that mean a field another of its names means too (`email` and
 * `E-Mail`, or `email` in `fields` and at the top level): the field's own key wins, else the
 * first name given; the others are set aside, by their index in `submitted`, to be reported
 * (never silently dropped). Null when no field is named twice, the usual case.
 */
export function namesSetAside(
  submitted: [string, unknown][],
  fields: (FieldDef | undefined)[],
): Map<number, SetAsideName> | null {
  // Without allocating: a submission names a few fields, and this runs for every handover.
  let repeated = false;
  for (let i = 1; i < fields.length && !repeated; i++) {
    const field = fields[i];
    if (!field) continue;
    for (let j = 0; j < i; j++) {
      if (fields[j] === field) {
        repeated = true;
        break;
      }
    }
  }
  if (!repeated) return null;
  const keptAt = new Map<string, number>();
  fields.forEach((field, index) => {
    if (!field) return;
    const kept = keptAt.get(field.key);
    const byKey = (at: number) => submitted[at]![0] === field.key;
    if (kept === undefined || (byKey(index) && !byKey(kept))) keptAt.set(field.key, index);
  });
  const setAside = new Map<number, SetAsideName>();
  fields.forEach((field, index) => {
    const kept = field ? keptAt.get(field.key) : undefined;
    if (field && kept !== undefined && kept !== index) {
      setAside.set(index, { name: submitted[index]![0], field: field.key, kept: submitted[kept]![0] });
    }
  });
  return setAside;
}

/**
 * A submitted name the call does not use (unknown, or set aside): with a strict key a refusal
 * (interface rule 7), else a warning, `warning` when it says less than the refusal.
 */
export function reportUnusedName(
  strict: boolean,
  detail: ValidationDetail,
  into: { problems: ValidationDetail[]; warnings: { key: string; reason: string; message?: string }[] },
  warning: { key: string; reason: string; message?: string } = detail,
): void {
  if (strict) into.problems.push(detail);
  else into.warnings.push(warning);
}

/**
 * A name that matches no field (or no known key): with a strict key the refusal with `message`,
 * else the warning `{key, reason: unmapped}` (interface: Warning), which carries no message.
 */
export function reportUnmapped(
  strict: boolean,
  key: string,
  message: string,
  into: Parameters<typeof reportUnusedName>[2],
): void {
  reportUnusedName(strict, { key, reason: 'unmapped', message }, into, { key, reason: 'unmapped' });
}

/** The warning (or, with a strict key, the refusal) of a name set aside: `unmapped`, as decisions §5 names it. */
export function setAsideDetail({ name, field, kept }: SetAsideName): ValidationDetail {
  return {
    key: name,
    reason: 'unmapped',
    message:
      name === kept
        ? `${name} is given twice in the same call; the first value is kept, this one is set aside`
        : `${name} names the field ${field}, which ${kept} gives in the same call; its value is set aside`,
  };
}

/**
 * A record's values as read: an object whose prototype has no prototype, so that a field named
 * `__proto__` or `constructor` is plain data (nothing on the chain answers those names), made
 * with `new` so that V8 gives it fast properties. An `Object.create(null)` object is kept as a
 * dictionary, and writing the bulk statement's JSON of a hundred of those took three times as
 * long as of the same values in fast objects (docs/decisions.md, "Bulk's floor").
 */
const FieldValues = function FieldValues() {} as unknown as new () => Record<string, FieldValue>;
FieldValues.prototype = Object.create(null);

/**
 * Reads submitted name/value pairs against an entity: matched, typed, checked. Empty values are
 * left out. The result objects have no prototype chain to speak of (`FieldValues`), so a
 * `__proto__` name stays plain data.
 */
export function readValues(entity: EntityDef, submitted: [string, unknown][]): ReadValuesResult {
  const match = createFieldMatcher(entity);
  const values = new FieldValues();
  const problems: ValidationDetail[] = [];
  const unmapped: string[] = [];
  const fields = submitted.map(([name]) => match(name));
  const setAside = namesSetAside(submitted, fields);
  for (let index = 0; index < submitted.length; index++) {
    const [name, raw] = submitted[index]!;
    const field = fields[index];
    if (!field) {
      unmapped.push(name);
      continue;
    }
    if (setAside?.has(index)) continue;
    const coerced = readValue(field, raw);
    if (coerced === null) continue;
    if (coerced.ok) values[field.key] = coerced.value;
    else problems.push({ key: field.key, reason: coerced.reason, message: coerced.message });
  }
  return { values, problems, unmapped, setAside: setAside ? [...setAside.values()] : [] };
}

/** Required fields missing from the record's values (after a merge, for updates). */
export function missingRequired(entity: EntityDef, values: Record<string, unknown>): ValidationDetail[] {
  return entity.fields
    .filter(
      (field) =>
        field.required &&
        !(field.type === 'file' || field.type === 'files') &&
        isEmptyValue(values[field.key]),
    )
    .map((field) => ({ key: field.key, reason: 'required', message: `${field.label} is required` }));
}

/** Display name (decisions §3): first + last name, else company, else email. */
export function displayName(entity: EntityDef, values: Record<string, unknown>): string {
  const roles = nameRolesOf(entity);
  const byRole = (key: string | undefined) => {
    const value = key === undefined ? undefined : values[key];
    return typeof value === 'string' ? value.trim() : '';
  };
  const first = byRole(roles.first_name);
  const last = byRole(roles.last_name);
  const person = first && last ? `${first} ${last}` : first || last;
  return truncate(person || byRole(roles.company) || byRole(roles.email), 300);
}

type NameRole = 'first_name' | 'last_name' | 'company' | 'email';

/** The keys of the fields a display name is made of, once per definition (see `matchers`). */
const nameRoles = new WeakMap<EntityDef, Partial<Record<NameRole, string>>>();

function nameRolesOf(entity: EntityDef): Partial<Record<NameRole, string>> {
  let roles = nameRoles.get(entity);
  if (roles === undefined) {
    roles = {};
    for (const role of ['first_name', 'last_name', 'company', 'email'] as const) {
      const field = entity.fields.find((f) => f.role === role);
      if (field) roles[role] = field.key;
    }
    nameRoles.set(entity, roles);
  }
  return roles;
}

/** The key of the field with the email role, which notes look records up by (decisions §3). */
export function emailFieldOf(fields: readonly { key: string; role?: string | null }[]): string | null {
  return fields.find((field) => field.role === 'email')?.key ?? null;
}

export function emailOf(entity: Pick<EntityDef, 'fields'>, values: Record<string, unknown>): string | null {
  const field = emailFieldOf(entity.fields);
  const value = field ? values[field] : undefined;
  return typeof value === 'string' && value.trim() !== '' ? matchingForm(value) : null;
}

/**
 * Under an update or ignore rule no two records may share the rule's values: the database
 * refuses a second record with the same key (records.dedupe_unique).
 */
export function dedupeKeyIsUnique(
  entity: Pick<EntityDef, 'duplicateRule'>,
  dedupeKey: string | null,
): boolean {
  const action = entity.duplicateRule?.action;
  return dedupeKey !== null && (action === 'update' || action === 'ignore');
}

/** What writers of one duplicate key lock (records.lock), so that they take turns. */
export function dedupeLockOf(entityId: string, dedupeKey: string): string {
  return `dedupe:${entityId}:${dedupeKey}`;
}

/** Normalised duplicate-rule values, or null when any of them is missing. */
export function dedupeKeyOf(
  entity: Pick<EntityDef, 'duplicateRule'>,
  values: Record<string, unknown>,
): string | null {
  const rule = entity.duplicateRule;
  if (!rule) return null;
  const parts: string[] = [];
  for (const key of rule.match) {
    const value = values[key];
    if (isEmptyValue(value)) return null;
    parts.push(matchingForm(String(value)));
  }
  return parts.join('\u001f');
}
