import { AppError, type ValidationDetail } from '../../http/errors.ts';
import type { BookingRequest } from '../booking/booking.service.ts';
import { DOCUMENT_REF_KEYS } from '../documents/documents.service.ts';
import { blankNoteWarning, isNoteText } from '../notes/note-text.ts';
import type { Handover, HandoverNote, Warning } from './intake.service.ts';

/** Top-level keys of POST /api/v1/records that are not field names (interface: rule 1). */
export const S2_RESERVED_KEYS = new Set([
  'entity',
  'fields',
  'note',
  'documents',
  'crm',
  'booking',
  'distribution',
  'meta',
]);
export const ORIGIN_KEYS = [
  'utm_source',
  'utm_medium',
  'utm_campaign',
  'utm_content',
  'utm_term',
  'gclid',
  'fbclid',
  'referrer',
] as const;
const META_KEYS = new Set<string>(['source', 'idempotency_key', 'external_id', ...ORIGIN_KEYS]);
/** The module each optional intake node needs. */
const MODULE_NODES = [
  ['crm', 'crm'],
  ['booking', 'booking'],
  ['distribution', 'distribution'],
] as const;

/** Whether a value is a JSON object (not null, not an array). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The module nodes taken out of a body by `setAsideModuleNodes`, by body. */
const setAside = new WeakMap<object, string[]>();

/**
 * Takes the nodes of modules the account lacks out of an S2 record body before its schema is
 * checked: such a node is ignored with a warning whatever it holds (interface: "ignored and
 * reported as a warning rather than rejecting the request"), so a malformed one must not refuse
 * the body either. `readS2Body` still warns of each.
 */
export function setAsideModuleNodes(body: unknown, modules: readonly string[]): void {
  if (!isJsonObject(body)) return;
  const names: string[] = [];
  for (const [node, module] of MODULE_NODES) {
    if (!modules.includes(module) && Object.hasOwn(body, node)) {
      delete body[node];
      names.push(node);
    }
  }
  if (names.length > 0) setAside.set(body, names);
}

export interface S2RecordBody {
  entity: string;
  fields?: Record<string, unknown>;
  note?: string;
  documents?: { url: string; name?: string; field?: string }[];
  crm?: { stage: string; pipeline?: string };
  booking?: S2BookingNode;
  distribution?: { partner_ids?: string[] };
  meta?: Record<string, unknown>;
  [key: string]: unknown;
}

/** The intake `booking` node (interface: POST /api/v1/records rules 2 and 3). */
export interface S2BookingNode {
  title?: string;
  duration_minutes?: number;
  /** Any JSON value; only text can be a time (the rest is an invalid_starts_at warning). */
  starts_at?: unknown;
  calendar_id?: string;
}

function bookingRequestOf(node: S2BookingNode): BookingRequest {
  return {
    title: node.title,
    durationMinutes: node.duration_minutes,
    // null is "no time given": a booking link, as without the key.
    startsAt: node.starts_at ?? undefined,
    calendarId: node.calendar_id,
  };
}

/** The keys each intake node takes; any other is an `unmapped` warning (refused under a strict key). */
const NODE_KEYS = {
  crm: new Set(['stage', 'pipeline']),
  booking: new Set(['title', 'duration_minutes', 'starts_at', 'calendar_id']),
  distribution: new Set(['partner_ids']),
  document: DOCUMENT_REF_KEYS,
  note: new Set(['text', 'tag']),
};

/**
 * Warns of each key of a node (`crm`, `booking`, `distribution`, a `documents` item, an S1 note
 * object) that the node does not take: `{key: "<at>.<name>", reason: "unmapped"}`, or with a
 * strict key a refusal, as for unknown `meta` keys (interface: unknown input is accepted with
 * warnings unless the key is strict). The node's own readers take only the keys they know.
 */
function warnUnknownNodeKeys(
  node: unknown,
  known: ReadonlySet<string>,
  at: string,
  warnings: Warning[],
): void {
  if (!isJsonObject(node)) return;
  for (const key of Object.keys(node))
    if (!known.has(key)) warnings.push({ key: `${at}.${key}`, reason: 'unmapped' });
}

/** A value's own entries, added to `into` without a list between (it runs for every bulk entry). */
function addOwnEntries(value: object, into: [string, unknown][]): void {
  // Object.keys lists own keys only, and a JSON `__proto__` key is an own key: it stays data.
  for (const key of Object.keys(value)) into.push([key, (value as Record<string, unknown>)[key]]);
}

function ownEntries(value: object): [string, unknown][] {
  const entries: [string, unknown][] = [];
  addOwnEntries(value, entries);
  return entries;
}

function metaString(
  meta: Record<string, unknown>,
  key: string,
  max: number,
  problems: ValidationDetail[],
): string | null {
  const value = meta[key];
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string' && typeof value !== 'number') {
    problems.push({ key: `meta.${key}`, reason: 'invalid_type', message: `meta.${key} must be text` });
    return null;
  }
  const text = String(value).trim();
  if (text.length > max) {
    problems.push({
      key: `meta.${key}`,
      reason: 'too_long',
      message: `meta.${key} is longer than ${max} characters`,
    });
    return null;
  }
  return text === '' ? null : text;
}

/** Reads a POST /api/v1/records body (or one bulk entry) into a handover. */
export function readS2Body(body: S2RecordBody, modules: string[]): Handover {
  const warnings: Warning[] = [];
  const problems: ValidationDetail[] = [];
  const submitted: [string, unknown][] = [];
  if (body.fields !== undefined) {
    if (!isJsonObject(body.fields)) {
      problems.push({ key: 'fields', reason: 'invalid_type', message: 'fields must be an object' });
    } else {
      addOwnEntries(body.fields, submitted);
    }
  }
  for (const key of Object.keys(body)) {
    if (!S2_RESERVED_KEYS.has(key)) submitted.push([key, (body as Record<string, unknown>)[key]]);
  }
  // `fields` is required (interface); values as top-level keys (rule 1, a plain form's) stand
  // in for it, but a handover with neither has nothing to take in.
  if (body.fields === undefined && submitted.length === 0) {
    problems.push({ key: 'fields', reason: 'required', message: 'fields is required' });
  }

  const origin: Record<string, string> = {};
  let source: string | null = null;
  let externalId: string | null = null;
  // Most bodies have no `meta` (a bulk call's entries, a form's post): nothing to look up then.
  const meta = body.meta;
  if (meta) {
    for (const key of ORIGIN_KEYS) {
      const value = metaString(meta, key, 2000, problems);
      if (value !== null) origin[key] = value;
    }
    for (const key of Object.keys(meta)) {
      if (!META_KEYS.has(key)) warnings.push({ key: `meta.${key}`, reason: 'unmapped' });
    }
    source = metaString(meta, 'source', 100, problems);
    externalId = metaString(meta, 'external_id', 255, problems);
  }

  for (const [node] of MODULE_NODES) warnUnknownNodeKeys(body[node], NODE_KEYS[node], node, warnings);
  for (const [index, document] of (body.documents ?? []).entries()) {
    warnUnknownNodeKeys(document, NODE_KEYS.document, `documents.${index}`, warnings);
  }
  const nodesSetAside = setAside.get(body);
  for (const [node, module] of MODULE_NODES) {
    if (body[node] === undefined && !nodesSetAside?.includes(node)) continue;
    if (!modules.includes(module)) {
      warnings.push({
        key: node,
        reason: 'module_not_enabled',
        message: `the ${module} module is not enabled`,
      });
    }
  }
  const distribution =
    body.distribution && modules.includes('distribution')
      ? { partnerIds: body.distribution.partner_ids ?? null }
      : null;
  const crm =
    body.crm && modules.includes('crm')
      ? { stage: body.crm.stage, pipeline: body.crm.pipeline, keyPrefix: 'crm.' }
      : null;
  const booking = body.booking && modules.includes('booking') ? bookingRequestOf(body.booking) : null;

  if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
  const notes: HandoverNote[] = [];
  if (body.note !== undefined && isNoteText(body.note)) notes.push({ body: body.note });
  // A blank note (a form's empty textarea) adds nothing, which the answer says: no 422 for a form.
  else if (body.note !== undefined) warnings.push(blankNoteWarning('note'));
  return {
    entity: body.entity,
    submitted,
    notes,
    source,
    externalId,
    origin,
    crm,
    booking,
    distribution,
    assignee: null,
    viewers: [],
    documents: (body.documents ?? []).map(({ url, name, field }) => ({ url, name, field })),
    warnings,
  };
}

/**
 * What a body names of its lead before it is read (an intake log entry's `entity` and `source`,
 * for a call refused at the edge): `entity`, and `meta.source` (S2) or `source` (S1 bulk). Either
 * may be anything; the log takes only text.
 */
export function namedInBody(body: unknown): { entity: unknown; source: unknown } {
  if (!isJsonObject(body)) return { entity: undefined, source: undefined };
  return { entity: body.entity, source: isJsonObject(body.meta) ? body.meta.source : body.source };
}

/** The idempotency key of a handover: `meta.idempotency_key`, else the `Idempotency-Key` header. */
export function idempotencyKeyOf(
  body: { meta?: Record<string, unknown> } | undefined,
  header: unknown,
): unknown {
  const fromBody = body?.meta?.idempotency_key;
  // An empty key is sent and refused (decisions §4: 1–255 characters), not taken as no key.
  if (fromBody !== undefined && fromBody !== null) return fromBody;
  if (Array.isArray(header)) return header[0];
  return header;
}

/**
 * The body an idempotency key's request is compared by: without the key itself, and without a
 * `meta` left empty by its removal, so that one request sent with its key in `meta` and again
 * with the `Idempotency-Key` header (or the other way round) is the same request, not
 * `idempotency_key_reused`.
 */
export function bodyBesideKey(body: S2RecordBody): S2RecordBody {
  const meta = body.meta;
  if (meta === undefined || meta === null || !isJsonObject(meta)) return body;
  const { idempotency_key: _key, ...rest } = meta;
  const { meta: _meta, ...others } = body;
  return Object.keys(rest).length === 0 ? others : { ...others, meta: rest };
}

/**
 * The S1 spelling of the booking node: `booking` (true, or the S2 object) and the flat keys
 * `booking:starts_at`, `booking:title`, `booking:duration_minutes`, `booking:calendar_id`, which
 * plain forms can send.
 */
const S1_BOOKING_KEYS = {
  'booking:starts_at': 'starts_at',
  'booking:title': 'title',
  'booking:duration_minutes': 'duration_minutes',
  'booking:calendar_id': 'calendar_id',
} as const;

/** Keys of POST /api/intake that are parameters, not field names. */
export const S1_RESERVED_KEYS = new Set([
  'entity',
  'lead_object',
  'assignee',
  'viewers',
  'note',
  'notes',
  'booking',
  ...Object.keys(S1_BOOKING_KEYS),
]);

/** The booking an S1 lead asks for, or null; its values were typed by the route's schema. */
function readS1Booking(body: Record<string, unknown>): S2BookingNode | null {
  const node = body.booking;
  let booking: S2BookingNode | null =
    node !== null && typeof node === 'object' ? { ...(node as S2BookingNode) } : node === true ? {} : null;
  for (const [key, name] of Object.entries(S1_BOOKING_KEYS)) {
    const value = body[key];
    if (value === undefined || value === '') continue;
    booking ??= {};
    (booking as Record<string, unknown>)[name] = value;
  }
  return booking;
}

function asList(value: unknown): unknown[] {
  if (value === undefined || value === null || value === '') return [];
  return Array.isArray(value) ? value : [value];
}

/**
 * S1's `note` and `notes`. A blank note (empty, or of characters that show nothing) adds nothing
 * and says so in a `blank` warning keyed `note` or `notes.<index>`, as S2's blank note does.
 */
function readS1Notes(
  body: Record<string, unknown>,
  problems: ValidationDetail[],
  warnings: Warning[],
): HandoverNote[] {
  const notes: HandoverNote[] = [];
  const items: [string, unknown][] = [
    ...(body.note === undefined || body.note === null ? [] : [['note', body.note] as [string, unknown]]),
    ...asList(body.notes).map((item, index): [string, unknown] => [`notes.${index}`, item]),
  ];
  for (const [key, item] of items) {
    if (typeof item === 'string') {
      if (isNoteText(item)) notes.push({ body: item });
      else warnings.push(blankNoteWarning(key));
    } else if (item && typeof item === 'object' && typeof (item as { text?: unknown }).text === 'string') {
      warnUnknownNodeKeys(item, NODE_KEYS.note, key, warnings);
      const { text, tag } = item as { text: string; tag?: unknown };
      if (isNoteText(text)) notes.push({ body: text, tag: typeof tag === 'string' ? tag : null });
      else warnings.push(blankNoteWarning(key));
    } else {
      problems.push({
        key: 'notes',
        reason: 'invalid_type',
        message: 'notes are strings or {text, tag} objects',
      });
    }
  }
  if (notes.length > 50) problems.push({ key: 'notes', reason: 'too_many', message: 'at most 50 notes' });
  return notes;
}

/** `notes[]`, `notes[2]`, `notes[2][text]`, `notes[2][tag]`, `viewers[]`, `viewers[0]`. */
const S1_BRACKET_KEY = /^(notes|viewers)\[(\d{0,3})\](?:\[(text|tag)\])?$/;

/**
 * The list parameters of a form in the bracket spellings form libraries write (a form has no
 * other way to send a note's tag): gathered into `notes` and `viewers` after the plain ones, in
 * index order (`x[]` after the indexed ones, as sent), and bounded as the JSON spellings are
 * (the schema saw only flat names).
 */
function gatherBracketLists(body: Record<string, unknown>, problems: ValidationDetail[]) {
  type Piece = { list: 'notes' | 'viewers'; at: number; seq: number; part?: 'text' | 'tag'; item: unknown };
  const pieces: Piece[] = [];
  for (const [key, value] of ownEntries(body)) {
    const match = S1_BRACKET_KEY.exec(key);
    if (!match) continue;
    const list = match[1] as Piece['list'];
    const part = match[3] as Piece['part'];
    const limit = part === 'tag' ? 100 : 10_000;
    for (const item of asList(value)) {
      if (list === 'notes' && typeof item === 'string' && item.length > limit)
        problems.push({ key, reason: 'too_long', message: `at most ${limit} characters` });
      const at = match[2] === '' ? Number.POSITIVE_INFINITY : Number(match[2]);
      pieces.push({ list, at, seq: pieces.length, part, item });
    }
  }
  if (pieces.length === 0) return body;
  // Appended pieces (at infinity) compare as NaN among themselves: then the order sent decides.
  pieces.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const notes: unknown[] = [];
  const noteAt = new Map<number, Record<string, unknown>>();
  for (const piece of pieces) {
    if (piece.list !== 'notes') continue;
    if (piece.part === undefined) {
      notes.push(piece.item);
      continue;
    }
    let note = Number.isFinite(piece.at) ? noteAt.get(piece.at) : undefined;
    if (!note) {
      note = {};
      noteAt.set(piece.at, note);
      notes.push(note);
    }
    note[piece.part] = piece.item;
  }
  const viewers = pieces.filter((piece) => piece.list === 'viewers').map((piece) => piece.item);
  return {
    ...body,
    notes: [...asList(body.notes), ...notes],
    viewers: [...asList(body.viewers), ...viewers],
  };
}

/**
 * Reads a flat S1 lead (POST /api/intake body, or one S1 bulk item). `status:<pipeline>` keys
 * place the lead in a stage and need the CRM module (decisions §7).
 */
export function readS1Lead(
  given: Record<string, unknown>,
  modules: string[],
  defaults: { entity?: string; source?: string | null } = {},
): Handover {
  const problems: ValidationDetail[] = [];
  const body = gatherBracketLists(given, problems);
  const entity = body.entity ?? body.lead_object ?? defaults.entity;
  if (typeof entity !== 'string' || entity.trim() === '') {
    problems.push({ key: 'entity', reason: 'required', message: 'entity (or lead_object) is required' });
  } else if (
    // Two names of the entity that name different ones: neither is set aside without a word.
    typeof body.lead_object === 'string' &&
    body.entity !== undefined &&
    body.lead_object.trim().toLowerCase() !== entity.trim().toLowerCase()
  ) {
    problems.push({
      key: 'lead_object',
      reason: 'not_allowed',
      message: `lead_object (${body.lead_object.trim()}) and entity (${entity.trim()}) differ; send one of them`,
    });
  }
  let crm: Handover['crm'] = null;
  const submitted: [string, unknown][] = [];
  for (const [key, value] of ownEntries(body)) {
    if (S1_RESERVED_KEYS.has(key) || S1_BRACKET_KEY.test(key)) continue;
    if (key.toLowerCase().startsWith('status:')) {
      if (!modules.includes('crm')) throw new AppError('module_not_enabled');
      const pipeline = key.slice('status:'.length).trim();
      if (typeof value !== 'string' || value.trim() === '') {
        problems.push({ key, reason: 'invalid_type', message: `${key} must name a status` });
      } else if (crm) {
        // A lead is in one stage: a second status would be dropped without a word.
        problems.push({
          key,
          reason: 'too_many',
          message: `one status:<pipeline> key per lead; ${crm.keyPrefix.slice(0, -1)} is given too`,
        });
      } else {
        crm = { pipeline: pipeline || null, stage: value.trim(), keyPrefix: `${key}.` };
      }
      continue;
    }
    submitted.push([key, value]);
  }
  const assignee = body.assignee;
  if (assignee !== undefined && assignee !== '' && typeof assignee !== 'string') {
    problems.push({ key: 'assignee', reason: 'invalid_type', message: 'assignee is a user uuid or email' });
  }
  const viewers: string[] = [];
  for (const viewer of asList(body.viewers)) {
    if (typeof viewer !== 'string') {
      problems.push({ key: 'viewers', reason: 'invalid_type', message: 'viewers are user uuids or emails' });
      continue;
    }
    for (const part of viewer.split(',')) if (part.trim() !== '') viewers.push(part.trim());
  }
  if (viewers.length > 100)
    problems.push({ key: 'viewers', reason: 'too_many', message: 'at most 100 viewers' });
  const warnings: Warning[] = [];
  const notes = readS1Notes(body, problems, warnings);
  if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
  const bookingNode = readS1Booking(body);
  warnUnknownNodeKeys(body.booking, NODE_KEYS.booking, 'booking', warnings);
  if (bookingNode && !modules.includes('booking')) {
    warnings.push({
      key: 'booking',
      reason: 'module_not_enabled',
      message: 'the booking module is not enabled',
    });
  }
  return {
    entity: (entity as string).trim(),
    submitted,
    notes,
    source: defaults.source ?? null,
    externalId: null,
    origin: {},
    crm,
    booking: bookingNode && modules.includes('booking') ? bookingRequestOf(bookingNode) : null,
    distribution: null,
    assignee: typeof assignee === 'string' && assignee.trim() !== '' ? assignee.trim() : null,
    viewers,
    documents: [],
    warnings,
  };
}
