import type { ColumnType, Generated, Insertable, Kysely, Selectable, Transaction } from 'kysely';

/** A timestamp column: read as Date, written as Date or ISO string, defaulted by the database. */
type CreatedAt = ColumnType<Date, Date | string | undefined, Date | string>;
type Timestamp = ColumnType<Date, Date | string, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
/** jsonb: written as a JSON string (see db/json.ts), read as the parsed value. */
type Json<T> = ColumnType<T, string, string>;

export interface AccountsTable {
  id: string;
  name: string;
  modules: string[];
  rate_limit_per_minute: Generated<number>;
  is_demo: Generated<boolean>;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

export interface InstanceSettingsTable {
  account_id: Generated<string>;
  key: string;
  value: string;
  created_at: CreatedAt;
}

export type Role = 'owner' | 'admin' | 'member' | 'viewer';

export interface UsersTable {
  account_id: string;
  id: string;
  email: string;
  name: string;
  role: ColumnType<Role, Role | undefined, Role>;
  /** argon2id in PHC form; null until the person sets a password. */
  password_hash: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

export interface SessionsTable {
  account_id: string;
  id: string;
  user_id: string;
  token_hash: Buffer;
  via: 'password' | 'link';
  created_at: CreatedAt;
  last_seen_at: CreatedAt;
  expires_at: Timestamp;
}

export interface SignInTokensTable {
  account_id: string;
  id: string;
  user_id: string;
  token_hash: Buffer;
  expires_at: Timestamp;
  used_at: NullableTimestamp;
  created_at: CreatedAt;
}

export interface SignInFailuresTable {
  account_id: Generated<string>;
  id: string;
  subject: string;
  failed_at: CreatedAt;
}

export interface ApiKeysTable {
  account_id: string;
  id: string;
  name: string;
  prefix: string;
  key_hash: Buffer;
  strict: Generated<boolean>;
  permissions: string[];
  created_at: CreatedAt;
  revoked_at: NullableTimestamp;
  /** Whether the key may create, change and remove users (migration 0026). */
  manages_users: Generated<boolean>;
}

export interface SourcesTable {
  account_id: string;
  id: string;
  name: string;
  success_url: string | null;
  error_url: string | null;
  allowed_origins: Generated<string[]>;
  honeypot_field: Generated<string | null>;
  rate_limit_per_minute: Generated<number>;
  created_at: CreatedAt;
}

export interface SourceTokensTable {
  account_id: string;
  id: string;
  source_id: string;
  prefix: string;
  token_hash: Buffer;
  created_at: CreatedAt;
  revoked_at: NullableTimestamp;
}

export interface EntitiesTable {
  account_id: string;
  id: string;
  key: string;
  name: string;
  archived: Generated<boolean>;
  fields: Json<unknown[]>;
  duplicate_rule: ColumnType<unknown | null, string | null | undefined, string | null>;
  position: Generated<number>;
  created_at: CreatedAt;
  updated_at: CreatedAt;
  dedupe_rule_version: Generated<number>;
  dedupe_recomputing: Generated<boolean>;
  dedupe_recompute_cursor: string | null;
  dedupe_recompute_done: Generated<number>;
  dedupe_recompute_total: Generated<number>;
}

export interface PipelinesTable {
  account_id: string;
  id: string;
  entity_id: string;
  name: string;
  position: number;
  archived: Generated<boolean>;
}

export interface StagesTable {
  account_id: string;
  id: string;
  pipeline_id: string;
  name: string;
  position: number;
  archived: Generated<boolean>;
}

export interface RecordsTable {
  account_id: string;
  id: string;
  entity_id: string;
  name: Generated<string>;
  fields: Json<Record<string, unknown>>;
  source: Generated<string>;
  source_id: string | null;
  origin: Json<Record<string, string>>;
  external_id: string | null;
  email_lc: string | null;
  dedupe_key: string | null;
  dedupe_unique: Generated<boolean>;
  duplicate_of: string | null;
  pipeline_id: string | null;
  stage_id: string | null;
  stage_entered_at: NullableTimestamp;
  assignee_id: string | null;
  viewer_ids: ColumnType<string[], string[] | undefined, string[]>;
  /** The history's actor of the creation (migration 0032); NULL on rows from before. */
  created_by: string | null;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

export interface RecordEventsTable {
  account_id: string;
  id: string;
  record_id: string;
  type: string;
  message: string;
  actor: Generated<string>;
  data: ColumnType<Record<string, unknown>, string | undefined, string>;
  created_at: CreatedAt;
}

export interface StageHistoryTable {
  account_id: string;
  id: string;
  record_id: string;
  pipeline_id: string;
  stage_id: string;
  entered_at: CreatedAt;
  left_at: NullableTimestamp;
}

export interface NotesTable {
  account_id: string;
  id: string;
  record_id: string;
  kind: string;
  body: string;
  tag: string | null;
  sender: Generated<string>;
  sender_name: string | null;
  idempotency_key: string | null;
  /** A keyed API note's request, hashed (migration 0022); null for others and older notes. */
  request_hash: Generated<string | null>;
  created_at: CreatedAt;
}

export interface DocumentsTable {
  account_id: string;
  id: string;
  record_id: string;
  field: string | null;
  name: string;
  mime: string;
  size: ColumnType<string | number, number, number>;
  sha256: string;
  storage_key: string;
  source_url: string | null;
  created_at: CreatedAt;
}

/**
 * Document bytes kept in the database (LEADS_FILES_STORAGE=database): a file in chunks numbered
 * from 0; an empty file is one empty chunk. Written as a bytea parameter, read as a Uint8Array
 * (a Buffer on PostgreSQL).
 */
export interface DocumentFileChunksTable {
  account_id: string;
  key: string;
  seq: number;
  bytes: Uint8Array;
  created_at: CreatedAt;
}

export interface RecordTokensTable {
  account_id: string;
  id: string;
  record_id: string;
  token_hash: Buffer;
  fields: string[];
  expires_at: Timestamp;
  created_at: CreatedAt;
  revoked_at: NullableTimestamp;
}

export interface IdempotencyKeysTable {
  account_id: string;
  scope: string;
  key: string;
  request_hash: string;
  state: string;
  status_code: number | null;
  response: ColumnType<unknown | null, string | null | undefined, string | null>;
  lease_until: Timestamp;
  created_at: CreatedAt;
  expires_at: Timestamp;
}

export interface IntakeLogTable {
  account_id: string;
  id: string;
  request_id: string;
  endpoint: string;
  outcome: string;
  status_code: number;
  record_id: string | null;
  entity_key: string | null;
  source: string | null;
  warnings: Json<unknown[]>;
  error: string | null;
  /** A bulk call's outcome per entry (migration 0012); null for single-record calls. */
  items: ColumnType<unknown[] | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
}

export interface AutomationsTable {
  account_id: string;
  id: string;
  stage_id: string;
  name: string;
  action: string;
  config: ColumnType<Record<string, unknown>, string, string>;
  position: Generated<number>;
  enabled: Generated<boolean>;
  destination_id: string | null;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

/** An automation run that took effect; its id is the run's job id (migration 0012). */
export interface AutomationRunsTable {
  account_id: string;
  id: string;
  automation_id: string;
  record_id: string;
  created_at: CreatedAt;
}

export interface AutomationChainsTable {
  account_id: string;
  id: string;
  moves: number;
  created_at: CreatedAt;
}

export interface WebhookDestinationsTable {
  account_id: string;
  id: string;
  purpose: string;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: NullableTimestamp;
  enabled: Generated<boolean>;
  disabled_reason: string | null;
  failing_since: NullableTimestamp;
  events: Generated<string[]>;
  description: string | null;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

export interface OutboundMessagesTable {
  account_id: string;
  id: string;
  channel: string;
  destination_id: string | null;
  event_type: string;
  payload: Json<unknown>;
  status: Generated<string>;
  attempts: Generated<number>;
  max_attempts: number | null;
  next_attempt_at: CreatedAt;
  claim_id: string | null;
  claimed_until: NullableTimestamp;
  last_error: string | null;
  notify: string | null;
  ref: string | null;
  /** What sent the message, when its attempts are listed by it (an automation; migration 0023). */
  origin_id: string | null;
  created_at: CreatedAt;
  finished_at: NullableTimestamp;
  /** A successful attempt kept on the message (no attempt row): its HTTP status or SMTP reply code. */
  status_code: number | null;
  reply: string | null;
  /** Set only with a kept attempt. */
  duration_ms: number | null;
}

export interface OutboundAttemptsTable {
  account_id: string;
  id: string;
  message_id: string;
  destination_id: string | null;
  /** The message's origin_id, copied so that an origin's attempts are one index scan. */
  origin_id: string | null;
  attempt: number;
  outcome: string;
  status_code: number | null;
  reply: string | null;
  error: string | null;
  duration_ms: number;
  created_at: CreatedAt;
}

export interface PartnersTable {
  account_id: string;
  id: string;
  name: string;
  contact_person: Generated<string>;
  email: Generated<string>;
  phone: Generated<string>;
  street: Generated<string>;
  postal_code: Generated<string>;
  city: Generated<string>;
  country: Generated<string>;
  vat_id: Generated<string>;
  billing_address_differs: Generated<boolean>;
  billing_name: string | null;
  billing_street: string | null;
  billing_postal_code: string | null;
  billing_city: string | null;
  billing_country: string | null;
  billing_email: string | null;
  buyer_reference: Generated<string>;
  wants_e_invoice: Generated<boolean>;
  portal_right_contact: Generated<string>;
  portal_right_billing: Generated<string>;
  retired: Generated<boolean>;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

export interface DistributionsTable {
  account_id: string;
  id: string;
  entity_id: string;
  name: string;
  return_deadline_days: Generated<number>;
  redistribute_on_return: Generated<boolean>;
  enabled: Generated<boolean>;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

/** A participation's schedule as configured (decisions §8). */
export interface ParticipationSchedule {
  time_zone: string;
  weekdays: number[];
  from: string;
  to: string;
}

export interface ParticipationsTable {
  account_id: string;
  id: string;
  distribution_id: string;
  partner_id: string;
  channel: string;
  address: string;
  destination_id: string | null;
  price_cents: number;
  currency: Generated<string>;
  cap_per_day: number | null;
  cap_per_month: number | null;
  schedule: ColumnType<ParticipationSchedule | null, string | null, string | null>;
  paused: Generated<boolean>;
  paused_reason: string | null;
  weight: Generated<number>;
  current_weight: Generated<number>;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

export interface ParticipationCountsTable {
  account_id: string;
  participation_id: string;
  period: string;
  count: Generated<number>;
}

/** One filter condition of a distribution rule (decisions §8). */
export interface RuleFilter {
  field: string;
  op: 'equals' | 'in' | 'range' | 'postal_prefix';
  value?: unknown;
  values?: unknown[];
  min?: number | string;
  max?: number | string;
  prefix?: string;
}

export interface DistributionRulesTable {
  account_id: string;
  id: string;
  distribution_id: string;
  name: string;
  position: Generated<number>;
  filter: ColumnType<RuleFilter[], string | undefined, string>;
  strategy: Generated<string>;
  max_partners: Generated<number>;
  participation_ids: Generated<string[]>;
  round_robin_cursor: Generated<number>;
  created_at: CreatedAt;
}

export interface DistributionRunsTable {
  account_id: string;
  id: string;
  distribution_id: string;
  record_id: string;
  status: string;
  reason: string | null;
  triggered_by: string;
  started_at: CreatedAt;
  finished_at: NullableTimestamp;
}

export interface DeliveriesTable {
  account_id: string;
  id: string;
  run_id: string;
  record_id: string;
  distribution_id: string | null;
  participation_id: string;
  partner_id: string;
  rule_name: string;
  channel: string;
  status: Generated<string>;
  price_cents: number;
  currency: string;
  attempts: Generated<number>;
  error: string | null;
  message_id: string | null;
  created_at: CreatedAt;
  delivered_at: NullableTimestamp;
  returned_at: NullableTimestamp;
}

export interface ReturnReasonsTable {
  account_id: string;
  id: string;
  name: string;
  created_at: CreatedAt;
}

export interface DeliveryReturnsTable {
  account_id: string;
  id: string;
  delivery_id: string;
  reason_id: string | null;
  text: string | null;
  reported_by: string | null;
  /** Made with redistribution on (migration 0030): the record stays open when it reached no one. */
  redistribute: Generated<boolean>;
  created_at: CreatedAt;
}

export interface CalendarsTable {
  account_id: string;
  id: string;
  name: string;
  time_zone: string;
  slot_minutes: number;
  buffer_minutes: number;
  min_notice_minutes: number;
  horizon_days: number;
  capacity: number;
  weekly: Json<Record<string, [string, string][]>>;
  exceptions: Json<{ date: string; hours: [string, string][] }[]>;
  is_default: Generated<boolean>;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

export interface BookingLinksTable {
  account_id: string;
  id: string;
  record_id: string;
  calendar_id: string;
  token_hash: Buffer;
  title: string;
  /** Null: the calendar's slot length (migration 0028). */
  duration_minutes: number | null;
  expires_at: Timestamp;
  appointment_id: string | null;
  created_at: CreatedAt;
}

export interface AppointmentsTable {
  account_id: string;
  id: string;
  record_id: string;
  calendar_id: string;
  link_id: string | null;
  title: string;
  starts_at: Timestamp;
  ends_at: Timestamp;
  status: Generated<string>;
  sequence: Generated<number>;
  cancel_reason: string | null;
  cancelled_at: NullableTimestamp;
  created_at: CreatedAt;
}

/** A booked appointment's seat in one minute it covers (`minute`: minutes since 1970 UTC). */
export interface AppointmentSeatsTable {
  account_id: string;
  appointment_id: string;
  minute: number;
  calendar_id: string;
  seat: number;
}

/** Tables of the database as Kysely sees them. Module tables are added as their modules land. */
export interface Database {
  accounts: AccountsTable;
  instance_settings: InstanceSettingsTable;
  users: UsersTable;
  sessions: SessionsTable;
  sign_in_tokens: SignInTokensTable;
  sign_in_failures: SignInFailuresTable;
  api_keys: ApiKeysTable;
  sources: SourcesTable;
  source_tokens: SourceTokensTable;
  entities: EntitiesTable;
  pipelines: PipelinesTable;
  stages: StagesTable;
  records: RecordsTable;
  record_events: RecordEventsTable;
  stage_history: StageHistoryTable;
  notes: NotesTable;
  documents: DocumentsTable;
  document_file_chunks: DocumentFileChunksTable;
  record_tokens: RecordTokensTable;
  idempotency_keys: IdempotencyKeysTable;
  intake_log: IntakeLogTable;
  automations: AutomationsTable;
  automation_runs: AutomationRunsTable;
  automation_chains: AutomationChainsTable;
  webhook_destinations: WebhookDestinationsTable;
  outbound_messages: OutboundMessagesTable;
  outbound_attempts: OutboundAttemptsTable;
  partners: PartnersTable;
  distributions: DistributionsTable;
  participations: ParticipationsTable;
  participation_counts: ParticipationCountsTable;
  distribution_rules: DistributionRulesTable;
  distribution_runs: DistributionRunsTable;
  deliveries: DeliveriesTable;
  return_reasons: ReturnReasonsTable;
  delivery_returns: DeliveryReturnsTable;
  calendars: CalendarsTable;
  booking_links: BookingLinksTable;
  appointments: AppointmentsTable;
  appointment_seats: AppointmentSeatsTable;
}

export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;
/** What a repo function runs its SQL on: the pool, or the caller's transaction. */
export type Executor = Db | Tx;

export type AccountRow = Selectable<AccountsTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type EntityRow = Selectable<EntitiesTable>;
export type RecordRow = Selectable<RecordsTable>;
export type NewRecord = Insertable<RecordsTable>;
