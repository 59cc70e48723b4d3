import { randomUUID } from 'node:crypto';
import type { Db, Executor } from '../../db/types.ts';
import { AppError, type ValidationDetail, validationFailed } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { displayPrefix, generateToken, hashSecret } from '../../lib/credentials.ts';
import { decodeCursor, pageOf } from '../../lib/cursor.ts';
import { matchingForm } from '../../lib/text.ts';
import { writtenHttpUrl } from '../../lib/url.ts';
import { S2_RESERVED_KEYS } from '../intake/intake.handover.ts';
import type { SourceRow, SourcesRepo } from './sources.repo.ts';
import { MAX_SOURCES } from './sources.schemas.ts';

/** A source's website-form settings as the settings API takes them (decisions §13). */
export interface FormSettingsInput {
  success_url?: string | null;
  error_url?: string | null;
  allowed_origins?: string[];
  honeypot_field?: string | null;
  rate_limit_per_minute?: number;
}

/** The columns the settings change, only those given. */
type FormSettingsColumns = Partial<
  Pick<
    SourceRow,
    'success_url' | 'error_url' | 'allowed_origins' | 'honeypot_field' | 'rate_limit_per_minute'
  >
>;

/** An absolute http(s) address a browser may be sent to, or a problem. */
function checkAddress(key: string, value: string, problems: ValidationDetail[]): string {
  const url = writtenHttpUrl(value);
  if (!url || url.hostname === '') {
    problems.push({
      key,
      reason: 'invalid_format',
      message: `${key} must be an absolute http or https address, written without blanks or backslashes`,
    });
    return value;
  }
  if (url.username !== '' || url.password !== '') {
    problems.push({ key, reason: 'invalid_format', message: `${key} may not carry a user or password` });
  }
  return value;
}

/** A host name (letters, digits, dots, hyphens, after IDN conversion) or an IP literal. */
const HOST = /^(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*\.?|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-f:.]+\])$/;

/**
 * An origin as a browser sends it: scheme://host[:port], lower case, default port dropped
 * (`URL.origin`), so that the check compares like with like.
 */
export function normalizeOrigin(value: string): string | null {
  if (!/^https?:\/\/[^/?#@\s]+$/i.test(value)) return null;
  try {
    const url = new URL(value);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
    if (!HOST.test(url.hostname)) return null;
    return url.origin;
  } catch {
    return null;
  }
}

/** Checks and normalizes the given settings; missing keys stay missing. */
export function readFormSettings(input: FormSettingsInput): FormSettingsColumns {
  const problems: ValidationDetail[] = [];
  const columns: FormSettingsColumns = {};
  for (const key of ['success_url', 'error_url'] as const) {
    const value = input[key];
    if (value === undefined) continue;
    columns[key] = value === null ? null : checkAddress(key, value, problems);
  }
  if (input.allowed_origins !== undefined) {
    const origins: string[] = [];
    for (const [index, value] of input.allowed_origins.entries()) {
      const origin = normalizeOrigin(value);
      if (origin === null) {
        problems.push({
          key: `allowed_origins.${index}`,
          reason: 'invalid_format',
          message: 'an origin is scheme://host[:port] with http or https and a valid host',
        });
      } else if (!origins.includes(origin)) {
        origins.push(origin);
      }
    }
    columns.allowed_origins = origins;
  }
  if (input.honeypot_field !== undefined) {
    const name = input.honeypot_field;
    if (name !== null && S2_RESERVED_KEYS.has(name)) {
      problems.push({
        key: 'honeypot_field',
        reason: 'not_allowed',
        message: `${name} is a key of the intake body, not a trap`,
      });
    }
    columns.honeypot_field = name;
  }
  if (input.rate_limit_per_minute !== undefined) columns.rate_limit_per_minute = input.rate_limit_per_minute;
  if (problems.length > 0) throw validationFailed(problems);
  return columns;
}

function view(row: SourceRow & { token_prefix?: string | null }) {
  return {
    id: row.id,
    name: row.name,
    token_prefix: row.token_prefix ?? null,
    success_url: row.success_url,
    error_url: row.error_url,
    allowed_origins: row.allowed_origins,
    honeypot_field: row.honeypot_field,
    rate_limit_per_minute: row.rate_limit_per_minute,
    created_at: iso(row.created_at),
  };
}

const sourceNotFound = () => new AppError('not_found', { message: 'Source not found' });

export function createSourcesService({
  db,
  repo,
  currentPublicUrl,
}: {
  db: Db;
  repo: SourcesRepo;
  /** PUBLIC_URL, for the intake address a new token answers with. */
  currentPublicUrl: () => string;
}) {
  const intakeUrl = (token: string) => `${currentPublicUrl()}/api/v1/in/${token}`;

  /** Revokes whatever token the source has and issues a new one: one active token per source. */
  async function issueToken(accountId: string, sourceId: string, tx: Executor): Promise<string> {
    const token = generateToken('st_');
    await repo.revokeTokens(accountId, sourceId, tx);
    await repo.insertToken(
      accountId,
      { id: randomUUID(), sourceId, prefix: displayPrefix(token), tokenHash: hashSecret(token) },
      tx,
    );
    return token;
  }

  /**
   * A name is taken when another source's looks alike once case and surrounding blanks are
   * ignored (`Web` and `web `): people could not tell the two apart in a record's `source`. Under
   * the account's lock, so that two requests at once cannot both take a name. The unique index
   * on lower(name) stays as a floor; sources alike only by blanks made before are kept.
   * Answers how many sources the account has (creation bounds them).
   */
  async function refuseTakenName(accountId: string, name: string, tx: Executor, except?: string) {
    await repo.lockNames(accountId, tx);
    const form = matchingForm(name);
    const sources = await repo.names(accountId, tx);
    const taken = sources.some((source) => source.id !== except && matchingForm(source.name) === form);
    if (taken) throw new AppError('name_taken', { message: `A source named ${name} exists` });
    return sources.length;
  }

  return {
    async create(accountId: string, input: { name: string } & FormSettingsInput) {
      const settings = readFormSettings(input);
      return db.transaction().execute(async (tx) => {
        const existing = await refuseTakenName(accountId, input.name, tx);
        if (existing >= MAX_SOURCES) {
          throw new AppError('validation_failed', {
            details: [
              { key: 'name', reason: 'too_many', message: `at most ${MAX_SOURCES} sources per account` },
            ],
          });
        }
        const row = await repo.insert(accountId, { id: randomUUID(), name: input.name, ...settings }, tx);
        const token = await issueToken(accountId, row.id, tx);
        const { token_prefix: _prefix, ...shown } = view(row);
        return { ...shown, token, intake_url: intakeUrl(token) };
      });
    },

    async get(accountId: string, sourceId: string) {
      const row = await repo.findWithToken(accountId, sourceId);
      if (!row) throw sourceNotFound();
      return view(row);
    },

    /** Changes the given settings (and name); a missing key is unchanged. */
    async update(accountId: string, sourceId: string, input: { name?: string } & FormSettingsInput) {
      const settings = readFormSettings(input);
      await db.transaction().execute(async (tx) => {
        const current = await repo.find(accountId, sourceId, tx);
        if (!current) throw sourceNotFound();
        // The name it has is no rename: a source kept alike to another from before stays usable.
        if (input.name !== undefined && input.name !== current.name) {
          await refuseTakenName(accountId, input.name, tx, sourceId);
        }
        const changes = input.name === undefined ? settings : { ...settings, name: input.name };
        if (Object.keys(changes).length > 0) await repo.update(accountId, sourceId, changes, tx);
      });
      return this.get(accountId, sourceId);
    },

    async list(accountId: string, limit: number, cursor: string | undefined) {
      const page = pageOf(await repo.list(accountId, limit + 1, decodeCursor(cursor)), limit);
      return { sources: page.items.map(view), next_cursor: page.nextCursor };
    },

    async rotateToken(accountId: string, sourceId: string) {
      return db.transaction().execute(async (tx) => {
        if (!(await repo.find(accountId, sourceId, tx))) throw sourceNotFound();
        const token = await issueToken(accountId, sourceId, tx);
        return { token, intake_url: intakeUrl(token) };
      });
    },

    async revokeToken(accountId: string, sourceId: string) {
      return db.transaction().execute(async (tx) => {
        if (!(await repo.find(accountId, sourceId, tx))) throw sourceNotFound();
        await repo.revokeTokens(accountId, sourceId, tx);
      });
    },
  };
}

export type SourcesService = ReturnType<typeof createSourcesService>;
