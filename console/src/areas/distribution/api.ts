// Shapes of the distribution endpoints the console reads (decisions §8; the route schemas in
// src/modules/distribution/*.schemas.ts), shared by the deliveries, partners and setup screens.

import { api } from '../../lib/api.ts';

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'returned'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface Delivery {
  id: string;
  status: DeliveryStatus;
  partner: string;
  partner_id: string;
  channel: 'webhook' | 'email';
  rule: string;
  price_cents: number;
  currency: string;
  attempts: number;
  error: string | null;
  created_at: string;
  delivered_at: string | null;
  returned_at: string | null;
  record_id: string;
  run_id: string;
}

export interface DeliveryPage {
  deliveries: Delivery[];
  next_cursor: string | null;
}

export interface ReturnReason {
  id: string;
  name: string;
}

export interface Partner {
  id: string;
  name: string;
  contact_person: string;
  email: string;
  phone: string;
  street: string;
  postal_code: string;
  city: string;
  country: string;
  vat_id: string;
  billing_address_differs: boolean;
  billing_name: string | null;
  billing_street: string | null;
  billing_postal_code: string | null;
  billing_city: string | null;
  billing_country: string | null;
  billing_email: string | null;
  buyer_reference: string;
  wants_e_invoice: boolean;
  retired: boolean;
  gaps: string[];
  created_at: string;
  updated_at: string;
}

export interface PartnerPage {
  partner: Partner[];
  next_cursor: string | null;
}

export interface Schedule {
  time_zone: string;
  weekdays: number[];
  from: string;
  to: string;
}

export interface Participation {
  id: string;
  entity: string;
  partner_id: string;
  partner_name: string;
  partner_retired: boolean;
  channel: 'webhook' | 'email';
  address: string;
  price_cents: number;
  currency: string;
  caps: { day: number | null; month: number | null };
  schedule: Schedule | null;
  weight: number;
  paused: boolean;
  paused_reason: string | null;
  previous_secret_until: string | null;
  created_at: string;
  updated_at: string;
  /** Only in the answer to creation and rotation (webhook). */
  secret?: string;
}

export const FILTER_OPS = ['equals', 'in', 'range', 'postal_prefix'] as const;
export const STRATEGIES = ['all', 'round_robin', 'weighted', 'cheapest', 'priciest'] as const;

export interface RuleFilter {
  field: string;
  op: (typeof FILTER_OPS)[number];
  value?: string | number | boolean;
  values?: (string | number | boolean)[];
  min?: string | number;
  max?: string | number;
  prefix?: string;
}

export interface Rule {
  id: string;
  name: string;
  position: number;
  filter: RuleFilter[];
  strategy: (typeof STRATEGIES)[number];
  max_partners: number;
  participation_ids: string[];
}

export interface DistributionSetup {
  id: string;
  entity: string;
  return_deadline_days: number;
  redistribute_on_return: boolean;
  enabled: boolean;
  participations: Participation[];
  rules: Rule[];
}

export interface TestResult {
  ok: boolean;
  channel: 'webhook' | 'email';
  message: string;
  status: number;
  response: string;
  request: { url: string; body: string };
}

export interface EntityListing {
  entities: { key: string; label: string; fields: { key: string; label: string; type: string }[] }[];
  modules: string[];
}

/** The settings API's setups; participations of one partner are gathered from them. */
export const SETUPS_KEY = ['distribution', 'setups'] as const;
export const PARTNERS_KEY = ['distribution', 'partners'] as const;
export const DELIVERIES_KEY = ['distribution', 'deliveries'] as const;
export const RETURN_REASONS_KEY = ['distribution', 'return-reasons'] as const;

/** Every item of a cursor list (decisions §6), its pages of 500 followed through `next_cursor`. */
async function everyPage<T>(path: string, member: string, signal?: AbortSignal): Promise<T[]> {
  const all: T[] = [];
  let cursor: string | null = null;
  do {
    const page: Record<string, unknown> & { next_cursor: string | null } = await api(path, {
      query: { limit: 500, cursor },
      signal,
    });
    all.push(...(page[member] as T[]));
    cursor = page.next_cursor;
  } while (cursor);
  return all;
}

/** Every distribution setup of the account (settings API). */
export async function fetchSetups(signal?: AbortSignal): Promise<{ distributions: DistributionSetup[] }> {
  return { distributions: await everyPage('/api/v1/settings/distributions', 'distributions', signal) };
}

/** Every return reason, through the settings API or the one for returns (`/api/v1/distribution/…`). */
export async function fetchReturnReasons(
  path: '/api/v1/settings/return-reasons' | '/api/v1/distribution/return-reasons',
  signal?: AbortSignal,
): Promise<{ return_reasons: ReturnReason[] }> {
  return { return_reasons: await everyPage(path, 'return_reasons', signal) };
}
