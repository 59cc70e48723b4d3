import type { FastifyRequest } from 'fastify';
import { escapeUnstorable, isStorableText } from '../lib/text.ts';
import { RESOURCE_PARAMS } from './error-handler.ts';
import { AppError, type ValidationDetail } from './errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The top-level array of a bulk body whose entries are judged one by one. */
    bodyEntries?: string;
  }
  interface FastifyRequest {
    /** Problems of bulk entries found at the edge, by index (routes with `bodyEntries`). */
    entryProblems: Map<number, ValidationDetail[]> | null;
    /**
     * Set by the JSON body parser: the body's text holds no escape of NUL or of a surrogate, so
     * no key or string of it is text PostgreSQL cannot store (`jsonTextIsStorable`).
     */
    jsonTextStorable: boolean;
  }
}

/** An escape of NUL or of a surrogate (paired or not) in JSON text. */
const NUL_OR_SURROGATE_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

/**
 * Whether parsed JSON text can hold no text PostgreSQL cannot store: JSON has no raw NUL (a
 * control character must be escaped), and a body is decoded from UTF-8, where an unpaired
 * surrogate becomes U+FFFD, so such text comes only from an escape. One scan of the text,
 * instead of a test of each of its strings and keys; a false alarm (the text `\\u0000`, an
 * escaped backslash before `u0000`) only costs those tests.
 */
export function jsonTextIsStorable(text: string): boolean {
  return !NUL_OR_SURROGATE_ESCAPE.test(text);
}

/** JSON nesting deeper than this is refused (decisions §4). */
export const MAX_JSON_DEPTH = 32;
export const SINGLE_BODY_LIMIT = 1024 * 1024;
export const BULK_BODY_LIMIT = 16 * 1024 * 1024;
/** Problems named in one answer; a body full of them is refused just the same. */
const MAX_DETAILS = 20;

type Path = (string | number)[];

const INVALID_CHARACTERS = 'contains a NUL character or an unpaired UTF-16 surrogate';

/** The detail's key: the JSON path with dots (as schema failures name it), `body` for the root. */
function detailKey(path: Path): string {
  return path.length === 0 ? 'body' : escapeUnstorable(path.join('.'));
}

function note(details: ValidationDetail[], path: Path, reason: 'invalid_characters' | 'out_of_range') {
  if (details.length >= MAX_DETAILS) return;
  const message = reason === 'invalid_characters' ? INVALID_CHARACTERS : 'number out of range';
  details.push({ key: detailKey(path), reason, message });
}

/**
 * One pass over a parsed value: notes every key and string PostgreSQL cannot store and every
 * number JSON overflowed (`1e309` parses to Infinity), and answers true as soon as nesting
 * passes the limit.
 */
function walk(
  value: unknown,
  depth: number,
  path: Path,
  details: ValidationDetail[],
  checkText: boolean,
): boolean {
  if (typeof value === 'string') {
    if (checkText && !isStorableText(value)) note(details, path, 'invalid_characters');
    return false;
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) note(details, path, 'out_of_range');
    return false;
  }
  if (value === null || typeof value !== 'object') return false;
  if (depth > MAX_JSON_DEPTH) return true;
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      path.push(index);
      if (walk(value[index], depth + 1, path, details, checkText)) return true;
      path.pop();
    }
    return false;
  }
  for (const key of Object.keys(value)) {
    path.push(key);
    if (checkText && !isStorableText(key)) note(details, path, 'invalid_characters');
    if (walk((value as Record<string, unknown>)[key], depth + 1, path, details, checkText)) return true;
    path.pop();
  }
  return false;
}

export interface BodyInspection {
  /** Problems of the body outside its entries. */
  details: ValidationDetail[];
  /** Problems of each entry of `entriesKey`, keyed relative to the entry, by index. */
  entries: Map<number, ValidationDetail[]>;
}

/**
 * Checks a parsed body (decisions: HTTP conventions): 400 `invalid_body` when nested too deep,
 * else the text and numbers it cannot take. With `entriesKey`, the top-level array under that
 * key is judged entry by entry (bulk calls), so that one bad entry does not refuse the others.
 * `checkText` false skips the test of strings and keys, for JSON text `jsonTextIsStorable` passed.
 */
export function inspectBody(body: unknown, entriesKey?: string, checkText = true): BodyInspection {
  const details: ValidationDetail[] = [];
  const entries = new Map<number, ValidationDetail[]>();
  let tooDeep = false;
  const list = entriesKey !== undefined ? bulkEntries(body, entriesKey) : undefined;
  if (list) {
    const rest: Record<string, unknown> = Object.create(null);
    for (const key of Object.keys(body as object)) {
      if (key !== entriesKey) rest[key] = (body as Record<string, unknown>)[key];
    }
    tooDeep = walk(rest, 1, [], details, checkText);
    // One path and one list for all entries (a walk leaves its path as it found it, unless it
    // stops for depth); a new list only after an entry filled one.
    const path: Path = [];
    let found: ValidationDetail[] = [];
    for (let index = 0; index < list.length && !tooDeep; index++) {
      // An entry sits at depth 3: the body, its array, the entry.
      tooDeep = walk(list[index], 3, path, found, checkText);
      if (found.length > 0) {
        entries.set(index, found);
        found = [];
      }
    }
  } else {
    tooDeep = walk(body, 1, [], details, checkText);
  }
  if (tooDeep) {
    throw new AppError('invalid_body', { message: `JSON nesting deeper than ${MAX_JSON_DEPTH} levels` });
  }
  return { details, entries };
}

function bulkEntries(body: unknown, key: string): unknown[] | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const list = (body as Record<string, unknown>)[key];
  return Array.isArray(list) && Object.hasOwn(body, key) ? list : undefined;
}

/** Names of a query string or path whose key or value PostgreSQL cannot store. */
function unstorableNames(values: unknown): string[] {
  if (values === null || typeof values !== 'object') return [];
  const names: string[] = [];
  for (const [name, value] of Object.entries(values)) {
    const texts = Array.isArray(value) ? value : [value];
    if (!isStorableText(name) || texts.some((text) => typeof text === 'string' && !isStorableText(text))) {
      names.push(name);
    }
  }
  return names;
}

function invalidCharactersDetail(name: string): ValidationDetail {
  return { key: escapeUnstorable(name), reason: 'invalid_characters', message: INVALID_CHARACTERS };
}

/**
 * The edge check of every request, before its schema (decisions: HTTP conventions): path
 * parameters, query string and body may hold no text PostgreSQL cannot store, so that no route
 * can forget it. A path `id` or entity key that holds such text names no resource (404, like any
 * malformed id); other parameters and the query answer 422 like a schema failure; the body is 400 when
 * nested too deep, else 422, except the entries of a bulk body, left to the route.
 */
export function checkRequestInput(request: FastifyRequest): void {
  // No route: the not-found answer says so, whatever the address holds.
  if (request.is404) return;
  const badParams = unstorableNames(request.params);
  if (badParams.some((name) => RESOURCE_PARAMS.has(name))) throw new AppError('not_found');
  const badNames = [...badParams, ...unstorableNames(request.query)];
  if (badNames.length > 0) {
    throw new AppError('validation_failed', {
      details: badNames.slice(0, MAX_DETAILS).map(invalidCharactersDetail),
    });
  }
  if (request.body === undefined) return;
  const entriesKey = request.routeOptions.config.bodyEntries;
  const { details, entries } = inspectBody(request.body, entriesKey, !request.jsonTextStorable);
  if (details.length > 0) throw new AppError('validation_failed', { details });
  if (entries.size > 0) request.entryProblems = entries;
}
