import { randomUUID } from 'node:crypto';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Db, Executor } from '../../db/types.ts';
import { AppError, type ValidationDetail } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { decodeCursor, pageOf } from '../../lib/cursor.ts';
import { EMAIL_ADDRESS } from './checks.ts';
import { resolveCountry } from './countries.ts';
import type { DistributionService } from './distribution.service.ts';
import type { PartnerColumns, PartnerRow, PartnersRepo } from './partners.repo.ts';
import { PARTNER_KEY_SPELLINGS, type PartnerBody } from './partners.schemas.ts';

type SnakeKey = keyof typeof PARTNER_KEY_SPELLINGS;

/** The keys invoices need, from the main address or from the billing address (decisions §8). */
const MAIN_ADDRESS = ['street', 'postal_code', 'city', 'country', 'email'] as const;
const BILLING_ADDRESS = [
  'billing_street',
  'billing_postal_code',
  'billing_city',
  'billing_country',
  'billing_email',
] as const;
/** Main-address keys that are text columns; billing keys are nullable. */
const TEXT_KEYS = [
  'contact_person',
  'email',
  'phone',
  'street',
  'postal_code',
  'city',
  'buyer_reference',
] as const;
const BILLING_TEXT_KEYS = ['billing_name', 'billing_street', 'billing_postal_code', 'billing_city'] as const;

/** What an invoice still misses at this partner; empty when complete. */
export function gapsOf(row: PartnerRow): string[] {
  const keys = row.billing_address_differs ? BILLING_ADDRESS : MAIN_ADDRESS;
  const gaps: string[] = keys.filter((key) => !row[key]);
  if (row.wants_e_invoice && !row.buyer_reference) gaps.push('buyer_reference');
  return gaps;
}

export function presentPartner(row: PartnerRow) {
  return {
    id: row.id,
    name: row.name,
    contact_person: row.contact_person,
    email: row.email,
    phone: row.phone,
    street: row.street,
    postal_code: row.postal_code,
    city: row.city,
    country: row.country,
    vat_id: row.vat_id,
    billing_address_differs: row.billing_address_differs,
    billing_name: row.billing_name,
    billing_street: row.billing_street,
    billing_postal_code: row.billing_postal_code,
    billing_city: row.billing_city,
    billing_country: row.billing_country,
    billing_email: row.billing_email,
    buyer_reference: row.buyer_reference,
    wants_e_invoice: row.wants_e_invoice,
    portal_right_contact: row.portal_right_contact,
    portal_right_billing: row.portal_right_billing,
    retired: row.retired,
    gaps: gapsOf(row),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

function nameTaken(): AppError {
  return new AppError('partner_name_taken', { message: 'A partner of that name exists already' });
}

function notFound(): AppError {
  return new AppError('not_found', { message: 'Partner not found' });
}

/**
 * The body with each camelCase key read as its snake_case key. Both spellings with the same
 * value are one key; with different values the body is refused, since either reading would
 * drop what the caller said.
 */
function unifySpellings(
  body: Record<string, unknown>,
  problems: ValidationDetail[],
): Record<string, unknown> {
  const unified: Record<string, unknown> = Object.create(null);
  for (const [key, value] of Object.entries(body)) if (value !== undefined) unified[key] = value;
  for (const [snake, camel] of Object.entries(PARTNER_KEY_SPELLINGS) as [SnakeKey, string][]) {
    if (!(camel in unified)) continue;
    const camelValue = unified[camel];
    delete unified[camel];
    if (snake in unified && unified[snake] !== camelValue) {
      problems.push({
        key: snake,
        reason: 'conflicting_keys',
        message: `${snake} and ${camel} name one key and were given different values`,
      });
      continue;
    }
    unified[snake] = camelValue;
  }
  return unified;
}

function country(value: string, key: string, problems: ValidationDetail[]): string {
  const code = resolveCountry(value);
  if (code) return code;
  problems.push({
    key,
    reason: 'invalid_country',
    message: `${value} is no country code or name this service knows (or names several countries)`,
  });
  return value;
}

function email(value: string, key: string, problems: ValidationDetail[]): void {
  if (!EMAIL_ADDRESS.test(value)) {
    problems.push({ key, reason: 'invalid_format', message: 'an email address' });
  }
}

/** The columns a body sets, checked and normalised; a missing key is left out (unchanged). */
function columnsOf(input: PartnerBody): PartnerColumns {
  const problems: ValidationDetail[] = [];
  const body = unifySpellings(input as Record<string, unknown>, problems);
  const columns: PartnerColumns = {};
  if (typeof body.name === 'string') {
    const name = body.name.trim();
    if (name === '') problems.push({ key: 'name', reason: 'required', message: 'a name that is not blank' });
    columns.name = name;
  }
  for (const key of TEXT_KEYS) {
    if (typeof body[key] === 'string') columns[key] = (body[key] as string).trim();
  }
  if (columns.email) email(columns.email, 'email', problems);
  if (typeof body.country === 'string') {
    const text = body.country.trim();
    columns.country = text === '' ? '' : country(text, 'country', problems);
  }
  if (typeof body.vat_id === 'string') columns.vat_id = body.vat_id.replace(/\s+/g, '').toUpperCase();
  for (const key of BILLING_TEXT_KEYS) {
    if (body[key] === null) columns[key] = null;
    else if (typeof body[key] === 'string') columns[key] = (body[key] as string).trim() || null;
  }
  if (body.billing_country === null) columns.billing_country = null;
  else if (typeof body.billing_country === 'string') {
    const text = body.billing_country.trim();
    columns.billing_country = text === '' ? null : country(text, 'billing_country', problems);
  }
  if (body.billing_email === null) columns.billing_email = null;
  else if (typeof body.billing_email === 'string') {
    const text = body.billing_email.trim();
    columns.billing_email = text === '' ? null : text;
    if (text !== '') email(text, 'billing_email', problems);
  }
  for (const key of ['billing_address_differs', 'wants_e_invoice', 'retired'] as const) {
    if (typeof body[key] === 'boolean') columns[key] = body[key] as boolean;
  }
  if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
  return columns;
}

export interface PartnersServiceDeps {
  db: Db;
  repo: PartnersRepo;
  /** Ends a retired partner's pending deliveries in the retirement's transaction. */
  deliveries: Pick<DistributionService, 'stopPartnerDeliveries'>;
}

/** Partners of the distribution module (interface: S2 distribution module; decisions §8). */
export function createPartnersService({ db, repo, deliveries }: PartnersServiceDeps) {
  /**
   * Writes a partner's columns; setting `retired` also ends its pending deliveries (no retry
   * goes out to a partner retired since), in one transaction. Answers whether it exists.
   */
  function write(accountId: string, id: string, columns: PartnerColumns): Promise<boolean> {
    if (columns.retired !== true) return repo.update(accountId, id, columns);
    return db.transaction().execute(async (tx) => {
      if (!(await repo.update(accountId, id, columns, tx))) return false;
      await deliveries.stopPartnerDeliveries(accountId, id, tx);
      return true;
    });
  }

  async function load(accountId: string, id: string) {
    const row = await repo.find(accountId, id);
    if (!row) throw notFound();
    return row;
  }

  return {
    /** A partner of the account (retired ones too), or undefined: for the engine and the setup. */
    find(accountId: string, id: string, tx?: Executor): Promise<PartnerRow | undefined> {
      return repo.find(accountId, id, tx);
    },

    async create(accountId: string, body: PartnerBody) {
      const columns = columnsOf(body);
      const id = randomUUID();
      try {
        await repo.insert(accountId, id, { ...columns, name: columns.name! });
      } catch (error) {
        // The unique index decides, so that concurrent creations of one name make one partner.
        if (isUniqueViolation(error)) throw nameTaken();
        throw error;
      }
      return { id };
    },

    async get(accountId: string, id: string) {
      return presentPartner(await load(accountId, id));
    },

    async list(accountId: string, query: { q?: string; limit: number; cursor?: string }) {
      const rows = await repo.list(accountId, {
        q: query.q,
        limit: query.limit + 1,
        after: decodeCursor(query.cursor),
      });
      const page = pageOf(rows, query.limit);
      return { partner: page.items.map(presentPartner), next_cursor: page.nextCursor };
    },

    async update(accountId: string, id: string, body: PartnerBody) {
      const columns = columnsOf(body);
      let found: boolean;
      try {
        found = await write(accountId, id, columns);
      } catch (error) {
        if (isUniqueViolation(error)) throw nameTaken();
        throw error;
      }
      if (!found) throw notFound();
      return { id };
    },

    /**
     * Retires a partner: left out of listings and selections, kept where it was used; its
     * pending deliveries end failed (docs/decisions.md, Distribution runs).
     */
    async retire(accountId: string, id: string) {
      if (!(await write(accountId, id, { retired: true }))) throw notFound();
      return { id, retired: true };
    },
  };
}

export type PartnersService = ReturnType<typeof createPartnersService>;
