import { isDeepStrictEqual } from 'node:util';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Db, Executor } from '../../db/types.ts';
import { type Role, roleAtLeast } from '../../http/auth.ts';
import { AppError, type ErrorCode, type ValidationDetail } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { createBatcher } from '../../lib/batcher.ts';
import { decodeCursor, encodeCursor, refuseUnstorableTimes, timeBound } from '../../lib/cursor.ts';
import { timeOrderedId } from '../../lib/ids.ts';
import { createRecentKeys } from '../../lib/recent-keys.ts';
import { escapeUnstorable, truncate } from '../../lib/text.ts';
import type { OutboundService } from '../../outbound/outbound.service.ts';
import type { AuthService } from '../auth/auth.service.ts';
import type { BookingAnswer, BookingRequest, BookingService } from '../booking/booking.service.ts';
import { firstStage, type Placement, resolveStage } from '../crm/crm.stages.ts';
import type { DistributionService, RunOutcome } from '../distribution/distribution.service.ts';
import type { DocumentRef, DocumentsService, FetchedBatch } from '../documents/documents.service.ts';
import type { EntityDef } from '../entities/entities.model.ts';
import { type EntitiesService, entityNamed } from '../entities/entities.service.ts';
import type { IdempotencyRef } from '../idempotency/idempotency.repo.ts';
import type { StoreAnswer } from '../idempotency/idempotency.service.ts';
import {
  dedupeKeyIsUnique,
  dedupeKeyOf,
  dedupeLockOf,
  displayName,
  emailFieldOf,
  emailOf,
  type FieldValue,
  missingRequired,
  readValues,
  reportUnmapped,
  reportUnusedName,
  setAsideDetail,
} from '../records/field-values.ts';
import { recordEventData } from '../records/record-webhooks.ts';
import { isDuplicateValuesViolation, type NewRecordRow, type RecordsRepo } from '../records/records.repo.ts';
import type { UsersRepo } from '../users/users.repo.ts';
import type { BulkLogItem, IntakeLogEntry, IntakeLogFilter, IntakeRepo } from './intake.repo.ts';

/** The query of `GET /api/v1/intake-log`, as validated by its schema. */
export interface IntakeLogQuery {
  outcome?: string;
  endpoint?: string;
  source?: string;
  entity?: string;
  record_id?: string;
  request_id?: string;
  created_from?: string;
  created_to?: string;
  limit?: number;
  cursor?: string;
}

export interface Warning {
  key: string;
  reason: string;
  message?: string;
}

/** Who hands a record over, and through which door. */
export interface IntakeContext {
  accountId: string;
  modules: string[];
  /**
   * The API key's permissions; null for other credentials (a source token's handovers, a
   * signed-in person's, whose `role` is checked instead). A module node needs its module's.
   */
  permissions: readonly string[] | null;
  /** A signed-in person's role: a module node needs the role its module's endpoint needs. */
  role?: Role;
  /** Strict mode of the API key: unknown fields refuse the handover. */
  strict: boolean;
  sourceId: string | null;
  sourceName: string | null;
  /** Name of the API key (or of the signed-in person), shown as the sender of notes. */
  keyName: string | null;
  /** The history's actor for a signed-in person (`user:<email>`); else the key or the source. */
  actor?: string;
  requestId: string;
  endpoint: string;
  /**
   * The API key, when one was presented. `checked` false: it was taken from memory and must be
   * checked before anything is written (the one-statement create checks it itself).
   */
  key: { keyId: string; checked: boolean } | null;
  /**
   * Set for the entries of a bulk call: the call is logged as one entry listing every entry's
   * outcome (decisions §10), so nothing is logged per entry.
   */
  loggedByCall?: boolean;
}

export interface HandoverNote {
  body: string;
  tag?: string | null;
}

/** One record handover, read from either surface into one shape. */
export interface Handover {
  entity: string;
  /** Submitted names and values, in order; matched against the entity's fields. */
  submitted: [string, unknown][];
  notes: HandoverNote[];
  source: string | null;
  externalId: string | null;
  origin: Record<string, string>;
  crm: { stage: string; pipeline?: string | null; keyPrefix: string } | null;
  /** The booking asked for (booking module): a slot, or a link. */
  booking: BookingRequest | null;
  /** The S2 `distribution` node of an account with the module: distribute the record in the same call. */
  distribution: { partnerIds: string[] | null } | null;
  assignee: string | null;
  viewers: string[];
  /** Documents to fetch by URL: onto a file field, or into the record's pool. */
  documents: DocumentRef[];
  /** Warnings found while reading the handover (module nodes, unknown meta keys). */
  warnings: Warning[];
}

export interface IntakeOutcome {
  recordId: string;
  entityKey: string;
  created: boolean;
  updated: boolean;
  createdAt: string;
  /** The handover's email-role value as given, for S1 bulk answers. */
  email: string | null;
  warnings: Warning[];
  /** What the `booking` node led to: a link or an appointment (absent without a node). */
  booking?: BookingAnswer | null;
  /**
   * The distribution node's answer, shaped like the start answer (decisions §4); through a source
   * token only its status and reason (docs/decisions.md, Distribution runs).
   */
  distribution?: StartAnswer | Pick<StartAnswer, 'status' | 'reason'>;
}

type StartAnswer = Awaited<ReturnType<DistributionService['startAnswer']>>;

/**
 * The distribution node's answer for the handover's credential: a source token is anonymous (a
 * public form's door), so it learns whether the record went out and why not, never the partners,
 * their prices or the run (docs/decisions.md, Distribution runs).
 */
function distributionAnswerFor(ctx: IntakeContext, answer: StartAnswer): IntakeOutcome['distribution'] {
  return ctx.sourceId === null ? answer : { status: answer.status, reason: answer.reason };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What a body named (anything the sender sent) as a log entry holds it: trimmed text, or null. */
function loggedText(value: unknown, max: number): string | null {
  return typeof value === 'string' && value.trim() !== ''
    ? truncate(escapeUnstorable(value.trim()), max)
    : null;
}

/** Refusals already in the intake log (written by the service), which the call's own hook skips. */
const loggedRefusals = new WeakSet<AppError>();
/**
 * Refusals that leave no log entry (decisions §10 is read as "every intake call of an account"):
 * no valid credential or not its permission (whose account would it be?), and the rate limits,
 * which exist to keep a flood from costing writes.
 */
const UNLOGGED_REFUSALS = new Set<ErrorCode>([
  'unauthorized',
  'invalid_credentials',
  'forbidden',
  'csrf_failed',
  'rate_limited',
]);

/**
 * Who the record's history names for what a handover did (decisions §10 actors): the signed-in
 * person, else the API key (`api:<name>`), else the source token's source (`source:<name>`).
 */
function historyActor(ctx: IntakeContext): string {
  return (
    ctx.actor ?? (ctx.keyName ? `api:${ctx.keyName}` : ctx.sourceName ? `source:${ctx.sourceName}` : 'api')
  );
}

/**
 * A module node of a handover acts as its module's endpoints do (a stage placement, a booking,
 * paid deliveries), so an API key needs that module's permission for it beside records:write
 * (decisions §9: a key lacking a permission gets 403).
 */
function refuseNodesBeyondPermissions(ctx: IntakeContext, handover: Handover): void {
  // Whoever reads a public form could otherwise choose which partner buys the lead. The door's
  // schema refuses the key already (SourceTokenRecordBody); this holds whatever the body's path.
  if (ctx.sourceId !== null && handover.distribution?.partnerIds) {
    throw new AppError('validation_failed', {
      details: [
        {
          key: 'distribution.partner_ids',
          reason: 'not_allowed',
          message: `a source token cannot choose partners: the distribution's rules choose; send "distribution": {}`,
        },
      ],
    });
  }
  const { permissions, role } = ctx;
  if (!permissions && !role) return;
  const given: (keyof typeof NODE_LEAST_ROLE)[] = [];
  if (handover.crm !== null) given.push('crm');
  if (handover.booking !== null) given.push('booking');
  if (handover.distribution !== null) given.push('distribution');
  if (given.length === 0) return;
  const lacking = given.filter((node) =>
    role ? !roleAtLeast(role, NODE_LEAST_ROLE[node]) : !permissions!.includes(node),
  );
  if (lacking.length === 0) return;
  const nodes = `${lacking.join(', ')} node${lacking.length > 1 ? 's' : ''}`;
  throw new AppError('forbidden', {
    message: role
      ? `the ${nodes} ${lacking.length > 1 ? 'do' : 'does'} what the role ${role} may not: ${lacking.map((node) => `${node} needs ${NODE_LEAST_ROLE[node]}`).join(', ')}`
      : `the key lacks the permission its ${nodes} ${lacking.length > 1 ? 'need' : 'needs'}: ${lacking.join(', ')}`,
  });
}

/**
 * The least role of a signed-in person for each module node, the role its module's endpoint
 * needs (docs/decisions.md, People and sessions: roles in routes): a stage placement is a stage
 * move (`member`); a booking and a distribution run are the admin's.
 */
const NODE_LEAST_ROLE: Record<'crm' | 'booking' | 'distribution', Role> = {
  crm: 'member',
  booking: 'admin',
  distribution: 'admin',
};

/**
 * A source token's handover whose `meta.external_id` names a stored record: the token only
 * creates records (interface: Source token), and the external id is that record's.
 */
function sourceTokenCannotUpdate(): AppError {
  return new AppError('conflict', {
    message: 'meta.external_id names a stored record; a source token only creates records',
    extra: { reason: 'external_id' },
  });
}

/**
 * An update that would give a record the duplicate-rule values another record holds under an
 * `update` or `ignore` rule (one record a value set): 409 conflict `duplicate`, as a PATCH answers.
 * `holderId` names that record when known (null: the unique index refused the update).
 */
function duplicateValuesConflict(entity: EntityDef, holderId: string | null): AppError {
  const match = entity.duplicateRule?.match.join(', ') ?? 'duplicate-rule values';
  return new AppError('conflict', {
    message: `${holderId ? `record ${holderId}` : 'another record'} has the same ${match}; under the entity's duplicate rule two records may not share them`,
    extra: { reason: 'duplicate' },
  });
}

/** Reason of the warning that a stored record was not moved by a handover's `crm` node. */
export const EXISTING_RECORD = 'existing_record';

/**
 * The `crm` node (S1 `status:<pipeline>`) places only new records (decisions: Intake): on a
 * stored record that the handover updates or matches, a stage other than the record's own is
 * not acted on, and says so, naming the stage move. None when the node names the record's stage.
 */
function stageNotMoved(
  ctx: IntakeContext,
  handover: Handover,
  prepared: { entity: EntityDef; placement: Placement | null },
  existing: { id: string; pipeline_id: string | null; stage_id: string | null },
): Warning | null {
  const named = handover.crm ? prepared.placement : null;
  if (!named || (named.stage.id === existing.stage_id && named.pipeline.id === existing.pipeline_id)) {
    return null;
  }
  const pipeline = prepared.entity.pipelines.find((p) => p.id === existing.pipeline_id);
  const stage = pipeline?.stages.find((s) => s.id === existing.stage_id);
  const where =
    pipeline && stage
      ? `in ${pipeline.name} / ${stage.name}`
      : existing.stage_id === null
        ? 'in no stage'
        : 'in its stage';
  // S1 names the key as sent (`status:<pipeline>`) and its own status change.
  const message = answersAlways200(ctx)
    ? `the lead exists and stays ${where}: ${handover.crm!.keyPrefix.slice(0, -1)} places only new leads; change its status with PATCH /api/leads/${existing.id}/status`
    : `the record exists and stays ${where}: the crm node places only new records; move it with POST /api/v1/crm/records/${existing.id}/stage`;
  return { key: 'crm', reason: EXISTING_RECORD, message };
}

/** Values of the incoming handover that overwrite a stored record: the non-empty ones. */
function merge(
  stored: Record<string, unknown>,
  incoming: Record<string, FieldValue>,
): Record<string, unknown> {
  return { ...stored, ...incoming };
}

export interface IntakeServiceDeps {
  db: Db;
  auth: Pick<AuthService, 'checkApiKey' | 'forgetApiKey'>;
  entities: EntitiesService;
  records: RecordsRepo;
  users: UsersRepo;
  intakeLog: IntakeRepo;
  documents: DocumentsService;
  /**
   * Grouped statements of single-record creations written at once; the creations of one turn of
   * the event loop, and those that arrive while all of these run, go together in the next
   * statement (group commit). Default 4 (the service passes a third of its pool); 0 writes each
   * creation on its own.
   */
  concurrentCreates?: number;
  /** Account webhooks: `record.created`, `record.updated` and `note.added` are written with the records. */
  outbound: Pick<OutboundService, 'subscribers' | 'emitEvent' | 'enqueued'>;
  /** Acts on the `booking` node inside the intake's transaction. */
  booking: Pick<BookingService, 'forIntake'>;
  /** Runs the `distribution` node; without it the node is not acted on. */
  distribution?: Pick<DistributionService, 'distribute' | 'awaitFirstAttempts' | 'startAnswer'>;
}

/**
 * At most this many single-record creations go in one grouped statement. Measured on the bench
 * (50 connections, PostgreSQL): groups of up to 10 gave more requests a second and a lower p99
 * than groups of up to 100, whose long statements held the others back.
 */
const MAX_GROUPED_CREATES = 10;

/**
 * How long an account's grouped statements skip records a unique rule refuses from the start,
 * after one met such a record; and for how many accounts at most this is remembered.
 */
const CONFLICTS_REMEMBERED_MS = 60_000;
const CONFLICTS_REMEMBERED_MAX = 10_000;

type ManyItem = Parameters<RecordsRepo['createManyInOneStatement']>[1][number];
/** A handover of a batch: answered, refused, or left for the caller to take in on its own. */
export type BatchResult =
  | { kind: 'done'; status: number; body: unknown }
  | { kind: 'error'; error: AppError }
  | { kind: 'fallback' };
type GroupedOutcome = { kind: 'created'; createdAt: Date } | { kind: 'key_revoked' } | { kind: 'refused' };

/** S1 answers every taken-in lead with 200, created or not (interface: POST /intake). */
function answersAlways200(ctx: IntakeContext): boolean {
  return ctx.endpoint.startsWith('s1.');
}

/**
 * The status a taken-in handover is answered with, stored with its idempotency key and recorded
 * in its log entry: S2's 201 or 200, S1's 200 for either.
 */
function answeredStatus(ctx: IntakeContext, status: 200 | 201): number {
  return answersAlways200(ctx) ? 200 : status;
}

/** What became of a handover, in the words of the intake log. */
export function outcomeOf(result: Pick<IntakeOutcome, 'created' | 'updated'>): BulkLogItem['status'] {
  return result.created ? 'created' : result.updated ? 'updated' : 'unchanged';
}

export function createIntakeService({
  db,
  auth,
  entities,
  records,
  users,
  intakeLog,
  documents,
  concurrentCreates = 4,
  outbound,
  booking,
  distribution,
}: IntakeServiceDeps) {
  // Accounts whose grouped statements met a record a unique rule refused lately (a duplicate, an
  // external id taken): theirs skip such records from the start, since a first run that fails on
  // one is wasted work. The others insert first and run again only on a refusal.
  const conflictsSeen = createRecentKeys({ forMs: CONFLICTS_REMEMBERED_MS, max: CONFLICTS_REMEMBERED_MAX });

  /** Writes new records in one statement, with their `record.created` messages when subscribed. */
  async function createMany(accountId: string, items: ManyItem[], callLog: IntakeLogEntry | null = null) {
    const webhooks = await outbound.subscribers(accountId, 'record.created');
    const result = await records.createManyInOneStatement(
      accountId,
      items,
      webhooks,
      callLog,
      !conflictsSeen.has(accountId),
    );
    if (result.conflicted) conflictsSeen.add(accountId);
    if (webhooks.length > 0 && result.created.size > 0) outbound.enqueued();
    return result;
  }

  // Requests that arrive together, or while the database is busy with others, are written
  // together: one statement and one commit for many, and each answer only after its record
  // committed.
  const groupedCreates = createBatcher<ManyItem, GroupedOutcome>({
    maxBatch: MAX_GROUPED_CREATES,
    maxInFlight: concurrentCreates,
    async run(accountId, items) {
      // Two requests with one idempotency key in one group: the first goes, the other is taken
      // alone and finds the first's answer (the statement could not tell which one won).
      const answerKeys = new Set<string>();
      const repeated = new Set<ManyItem>();
      for (const item of items) {
        if (!item.answer) continue;
        const name = `${item.answer.scope}\u0000${item.answer.key}`;
        if (answerKeys.has(name)) repeated.add(item);
        else answerKeys.add(name);
      }
      const { created, keyRevoked } = await createMany(
        accountId,
        items.filter((item) => !repeated.has(item)),
      );
      return items.map((item): GroupedOutcome => {
        const createdAt = created.get(item.row.id);
        if (createdAt) return { kind: 'created', createdAt };
        return keyRevoked.has(item.row.id) ? { kind: 'key_revoked' } : { kind: 'refused' };
      });
    },
  });

  interface Prepared {
    entity: EntityDef;
    values: Record<string, FieldValue>;
    warnings: Warning[];
    placement: Placement | null;
    assigneeId: string | null;
    viewerIds: string[];
  }

  /** The handover's email-role value as given, for S1 bulk answers. */
  function givenEmailOf({ entity, values }: Prepared): string | null {
    const emailField = emailFieldOf(entity.fields);
    const given = emailField ? values[emailField] : undefined;
    return typeof given === 'string' ? given : null;
  }

  /** What a new record is written with besides its row: its notes and intake-log entry. */
  function newRecordItem(
    ctx: IntakeContext,
    row: NewRecordRow,
    handover: Handover,
    entityKey: string,
    warnings: Warning[],
  ): ManyItem {
    return {
      row,
      notes: handover.notes.map((note) => ({
        body: note.body,
        tag: note.tag ?? null,
        senderName: ctx.keyName,
      })),
      entityKey,
      log: ctx.loggedByCall
        ? null
        : {
            requestId: ctx.requestId,
            endpoint: ctx.endpoint,
            entityKey,
            warnings,
            ...(answersAlways200(ctx) ? { statusCode: 200 } : {}),
          },
    };
  }

  /** A remembered key that a write found revoked: forgotten, and the request refused. */
  function refuseRevokedKey(ctx: IntakeContext): never {
    auth.forgetApiKey(ctx.accountId, ctx.key!.keyId);
    throw new AppError('unauthorized');
  }

  /** Refuses a remembered API key that was revoked since; a live one counts as checked. */
  async function checkKey(ctx: IntakeContext) {
    if (!ctx.key || ctx.key.checked) return;
    if (!(await auth.checkApiKey(ctx.accountId, ctx.key.keyId))) throw new AppError('unauthorized');
    ctx.key.checked = true;
  }

  /** Everything that can be checked before writing: entity, values, stage, users. */
  async function prepare(ctx: IntakeContext, handover: Handover): Promise<Prepared> {
    refuseNodesBeyondPermissions(ctx, handover);
    return prepareWith(ctx, handover, await entities.find(ctx.accountId, handover.entity));
  }

  /**
   * `prepare` once the permissions are checked and the handover's entity looked up: synchronous
   * unless the handover names people (assignee, viewers), who are looked up. A bulk call looks
   * its entities up once and prepares its entries without a promise each.
   */
  function prepareWith(
    ctx: IntakeContext,
    handover: Handover,
    entity: EntityDef | undefined,
  ): Prepared | Promise<Prepared> {
    if (!entity || entity.archived) {
      throw new AppError('unknown_entity', { message: `No entity ${handover.entity}` });
    }
    const { values, problems, unmapped, setAside } = readValues(entity, handover.submitted);
    const warnings: Warning[] = [];
    // An unknown key is a warning, or with a strict key a refusal (interface rule 7), names in
    // `meta` (`meta.<name>`) as much as field names; other warnings stay warnings.
    const reported = { problems, warnings };
    const unknownKey = (key: string, message: string) => reportUnmapped(ctx.strict, key, message, reported);
    for (const warning of handover.warnings) {
      if (warning.reason === 'unmapped') unknownKey(warning.key, `${warning.key} is not a known key`);
      else warnings.push(warning);
    }
    for (const name of unmapped) unknownKey(name, `${name} matches no field of ${entity.key}`);
    for (const name of setAside) reportUnusedName(ctx.strict, setAsideDetail(name), reported);
    let placement: Prepared['placement'] = null;
    if (handover.crm) {
      const resolved = resolveStage(entity, handover.crm, handover.crm.keyPrefix);
      if ('reason' in resolved) problems.push(resolved);
      else placement = resolved;
    } else {
      // A new record enters its entity's first pipeline at the first stage, as a card would.
      placement = firstStage(entity);
    }
    const prepared: Prepared = { entity, values, warnings, placement, assigneeId: null, viewerIds: [] };
    if (handover.assignee || handover.viewers.length > 0) {
      return withPeople(ctx, handover, prepared, problems);
    }
    if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
    return prepared;
  }

  /** The handover's assignee and viewers looked up and set on `prepared`, or added to `problems`. */
  async function withPeople(
    ctx: IntakeContext,
    handover: Handover,
    prepared: Prepared,
    problems: ValidationDetail[],
  ): Promise<Prepared> {
    const named = [...(handover.assignee ? [handover.assignee] : []), ...handover.viewers];
    const found = await users.findByIdsOrEmails(
      ctx.accountId,
      named.filter((n) => UUID.test(n)).map((n) => n.toLowerCase()),
      named.filter((n) => !UUID.test(n)),
    );
    const resolve = (name: string) =>
      found.find((u) => u.id === name.toLowerCase() || u.email.toLowerCase() === name.toLowerCase())?.id;
    if (handover.assignee) {
      prepared.assigneeId = resolve(handover.assignee) ?? null;
      if (!prepared.assigneeId)
        problems.push({ key: 'assignee', reason: 'not_found', message: `no user ${handover.assignee}` });
    }
    for (const viewer of handover.viewers) {
      const id = resolve(viewer);
      if (!id) problems.push({ key: 'viewers', reason: 'not_found', message: `no user ${viewer}` });
      else if (!prepared.viewerIds.includes(id)) prepared.viewerIds.push(id);
    }
    if (prepared.viewerIds.length > 100) prepared.viewerIds = prepared.viewerIds.slice(0, 100);
    if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
    return prepared;
  }

  function newRecordRow(
    ctx: IntakeContext,
    handover: Handover,
    prepared: Prepared,
    duplicateOf: string | null,
  ): NewRecordRow {
    const { entity, values, placement } = prepared;
    const dedupeKey = dedupeKeyOf(entity, values);
    return {
      id: timeOrderedId(),
      entityId: entity.id,
      name: displayName(entity, values),
      fields: values,
      source: handover.source ?? ctx.sourceName ?? 'api',
      sourceId: ctx.sourceId,
      origin: handover.origin,
      externalId: handover.externalId,
      emailLc: emailOf(entity, values),
      dedupeKey,
      dedupeUnique: dedupeKeyIsUnique(entity, dedupeKey),
      duplicateOf,
      pipelineId: placement?.pipeline.id ?? null,
      stageId: placement?.stage.id ?? null,
      assigneeId: prepared.assigneeId,
      viewerIds: prepared.viewerIds,
      createdBy: historyActor(ctx),
    };
  }

  /**
   * The common case in one statement: a new record with no documents, where only a unique
   * rule (external id, duplicate-rule values) could make it something else. Undefined when such
   * a rule refused it: then the transactional path decides what to update.
   */
  async function createFast(
    ctx: IntakeContext,
    handover: Handover,
    prepared: Prepared,
    answer: (outcome: IntakeOutcome) => unknown,
    store: StoreAnswer | undefined,
  ): Promise<{ status: number; body: unknown; outcome: IntakeOutcome } | undefined> {
    const { entity } = prepared;
    // A booking and a distribution are written in the record's transaction.
    if (
      handover.documents.length > 0 ||
      handover.booking ||
      handover.distribution ||
      entity.duplicateRule?.action === 'create'
    )
      return undefined;
    if (missingRequired(entity, prepared.values).length > 0) return undefined;
    if (store?.namesWriteTime) return undefined;
    const row = newRecordRow(ctx, handover, prepared, null);
    const outcome: IntakeOutcome = {
      recordId: row.id,
      entityKey: entity.key,
      created: true,
      updated: false,
      createdAt: new Date().toISOString(),
      email: givenEmailOf(prepared),
      warnings: [...prepared.warnings],
    };
    const item = newRecordItem(ctx, row, handover, entity.key, outcome.warnings);
    const uncheckedKeyId = ctx.key && !ctx.key.checked ? ctx.key.keyId : null;
    if (concurrentCreates > 0 && !store && prepared.assigneeId === null && prepared.viewerIds.length === 0) {
      const grouped = await groupedCreates
        .submit(ctx.accountId, { ...item, uncheckedKeyId })
        // A statement that failed as a whole is retried alone below, so that each handover
        // gets its own answer (and a broken connection its 503 there).
        .catch(() => null);
      if (grouped?.kind === 'key_revoked') refuseRevokedKey(ctx);
      if (grouped) {
        if (ctx.key) ctx.key.checked = true;
        if (grouped.kind === 'refused') return undefined;
        outcome.createdAt = iso(grouped.createdAt);
        return { status: answeredStatus(ctx, 201), body: answer(outcome), outcome };
      }
    }
    const webhooks = await outbound.subscribers(ctx.accountId, 'record.created');
    const created = await records.createInOneStatement(ctx.accountId, row, {
      notes: item.notes,
      log: {
        requestId: ctx.requestId,
        endpoint: ctx.endpoint,
        entityKey: entity.key,
        warnings: outcome.warnings,
        statusCode: answeredStatus(ctx, 201),
        source: row.source,
      },
      logged: item.log !== null,
      answer: store ? { ...store.ref, statusCode: 201, body: answer(outcome) } : null,
      uncheckedKeyId,
      webhooks,
    });
    if (!created.keyLive) refuseRevokedKey(ctx);
    if (ctx.key) ctx.key.checked = true;
    if (!created.record) return undefined;
    if (webhooks.length > 0) outbound.enqueued();
    store?.saved();
    outcome.createdAt = iso(created.record.created_at);
    return { status: answeredStatus(ctx, 201), body: answer(outcome), outcome };
  }

  /** Notes of a handover; on an existing record each is a `note.added` webhook too. */
  async function addNotes(
    ctx: IntakeContext,
    tx: Executor,
    recordId: string,
    notes: HandoverNote[],
    existingRecord: boolean,
  ) {
    if (notes.length === 0) return;
    const added = await records.insertNotes(
      ctx.accountId,
      notes.map((note) => ({
        recordId,
        kind: 'general',
        body: note.body,
        tag: note.tag,
        senderName: ctx.keyName,
      })),
      tx,
    );
    await records.insertEvents(
      ctx.accountId,
      notes.map((note) => ({
        recordId,
        type: 'note_added',
        message: truncate(note.body, 500),
        actor: historyActor(ctx),
        data: { sender: ctx.actor ? 'user' : 'api', sender_name: ctx.keyName, tag: note.tag ?? null },
      })),
      tx,
    );
    if (!existingRecord) return;
    for (const [index, row] of added.entries()) {
      const note = notes[index]!;
      await outbound.emitEvent(tx, ctx.accountId, 'note.added', {
        record_id: recordId,
        note: {
          id: row.id,
          kind: row.kind,
          body: note.body,
          tag: note.tag ?? null,
          sender_name: ctx.keyName,
          created_at: iso(row.created_at),
        },
      });
    }
  }

  async function createRecord(
    ctx: IntakeContext,
    tx: Executor,
    handover: Handover,
    prepared: Prepared,
    duplicateOf: string | null,
    sharesDuplicateValues = false,
  ) {
    const { entity, values } = prepared;
    const missing = missingRequired(entity, values);
    if (missing.length > 0) throw new AppError('validation_failed', { details: missing });
    const newRow = newRecordRow(ctx, handover, prepared, duplicateOf);
    // A record that knowingly shares the duplicate-rule values of another (a new external id)
    // stays out of the uniqueness rule.
    if (sharesDuplicateValues) newRow.dedupeUnique = false;
    const { id } = newRow;
    // Its creation and first stage are facts of the row itself (see records.latestEvents).
    const row = await records.insert(ctx.accountId, newRow, tx);
    await addNotes(ctx, tx, id, handover.notes, false);
    await outbound.emitEvent(
      tx,
      ctx.accountId,
      'record.created',
      recordEventData(entity.key, { ...row, name: newRow.name, fields: values, source: newRow.source }),
    );
    return row;
  }

  async function updateRecord(
    ctx: IntakeContext,
    tx: Executor,
    handover: Handover,
    prepared: Prepared,
    existing: { id: string; fields: unknown; dedupe_key?: string | null; dedupe_unique?: boolean },
    reason: string,
  ) {
    const { entity } = prepared;
    const merged = merge(existing.fields as Record<string, unknown>, prepared.values);
    const missing = missingRequired(entity, merged);
    if (missing.length > 0) throw new AppError('validation_failed', { details: missing });
    const dedupeKey = dedupeKeyOf(entity, merged);
    // A record found by its external id may be given other duplicate-rule values (the external
    // id overrides the rule); one that holds its values uniquely may not take values another
    // record holds so. Checked under those values' lock, which intake's writers of them take, so
    // that the refusal is an answer rather than the unique index's error in the update.
    if (existing.dedupe_unique && dedupeKey !== null && dedupeKey !== existing.dedupe_key) {
      await records.lock(tx, ctx.accountId, dedupeLockOf(entity.id, dedupeKey));
      const holder = await records.uniqueHolderOf(ctx.accountId, entity.id, dedupeKey, existing.id, tx);
      if (holder) throw duplicateValuesConflict(entity, holder.id);
    }
    const row = await records
      .updateValues(
        ctx.accountId,
        existing.id,
        {
          fields: merged,
          name: displayName(entity, merged),
          emailLc: emailOf(entity, merged),
          dedupeKey,
          assigneeId: prepared.assigneeId,
          viewerIds: prepared.viewerIds,
        },
        tx,
      )
      .catch((error: unknown) => {
        // A writer that takes no lock (a PATCH, a key recompute) gave another record the values
        // meanwhile: the same refusal. The transaction is lost with it, and nothing is written.
        if (isDuplicateValuesViolation(error)) throw duplicateValuesConflict(entity, null);
        throw error;
      });
    // The values that differ from the stored ones: a repeat that changes nothing leaves no
    // history entry and sends no `record.updated` (whose `changed` lists what changed).
    const stored = existing.fields as Record<string, unknown>;
    const changed = Object.keys(prepared.values).filter(
      (key) => !isDeepStrictEqual(stored[key], merged[key]),
    );
    if (changed.length > 0) {
      await records.insertEvents(
        ctx.accountId,
        [
          {
            recordId: existing.id,
            type: 'lead_updated',
            actor: historyActor(ctx),
            message: `Updated by a repeated handover (${reason})`,
            data: { fields: changed, reason, request_id: ctx.requestId },
          },
        ],
        tx,
      );
      await outbound.emitEvent(tx, ctx.accountId, 'record.updated', {
        ...recordEventData(entity.key, { ...row, name: displayName(entity, merged), fields: merged }),
        changed,
      });
    }
    await addNotes(ctx, tx, existing.id, handover.notes, true);
    return row;
  }

  /**
   * The `distribution` node, in the record's transaction: a run triggered by intake; its answer
   * (deliveries still pending) goes into the outcome, and what it could not act on into warnings.
   */
  async function distributeWithin(
    ctx: IntakeContext,
    tx: Executor,
    handover: Handover,
    outcome: IntakeOutcome,
  ): Promise<RunOutcome | null> {
    if (!handover.distribution || !distribution) return null;
    try {
      const run = await distribution.distribute(
        ctx.accountId,
        outcome.recordId,
        {
          triggeredBy: 'intake',
          partnerIds: handover.distribution.partnerIds ?? undefined,
          actor: historyActor(ctx),
        },
        tx,
      );
      for (const id of run.unknownPartnerIds) {
        outcome.warnings.push({
          key: 'distribution.partner_ids',
          reason: 'unknown_partner',
          message: `no partner ${id}`,
        });
      }
      outcome.distribution = distributionAnswerFor(
        ctx,
        await distribution.startAnswer(ctx.accountId, run, tx),
      );
      return run;
    } catch (error) {
      if (!(error instanceof AppError) || error.code !== 'no_distribution') throw error;
      outcome.warnings.push({
        key: 'distribution',
        reason: 'no_distribution',
        message: `no distribution is set up for ${outcome.entityKey}`,
      });
      return null;
    }
  }

  /** Writes one prepared handover inside `tx`: external id, then duplicate rule, then a new record. */
  async function write(
    ctx: IntakeContext,
    tx: Executor,
    handover: Handover,
    prepared: Prepared,
  ): Promise<IntakeOutcome> {
    const { entity } = prepared;
    const warnings = [...prepared.warnings];
    const email = givenEmailOf(prepared);
    const outcome = (
      row: { id: string; created_at: Date },
      created: boolean,
      updated: boolean,
    ): IntakeOutcome => ({
      recordId: row.id,
      entityKey: entity.key,
      created,
      updated,
      createdAt: iso(row.created_at),
      email,
      warnings,
    });
    const keptInStage = (existing: Parameters<typeof stageNotMoved>[3]) => {
      const warning = stageNotMoved(ctx, handover, prepared, existing);
      if (warning) warnings.push(warning);
    };

    if (handover.externalId) {
      // The sender's own id declares the same lead and overrides every other rule (decisions §4).
      await records.lock(tx, ctx.accountId, `external:${entity.id}:${handover.externalId}`);
      const existing = await records.findByExternalId(ctx.accountId, entity.id, handover.externalId, tx);
      if (existing && ctx.sourceId !== null) throw sourceTokenCannotUpdate();
      if (existing) {
        keptInStage(existing);
        return outcome(await updateRecord(ctx, tx, handover, prepared, existing, 'external_id'), false, true);
      }
      const key = dedupeKeyOf(entity, prepared.values);
      const twin = key ? await records.findByDedupeKey(ctx.accountId, entity.id, key, tx) : undefined;
      return outcome(await createRecord(ctx, tx, handover, prepared, null, twin !== undefined), true, false);
    }

    const dedupeKey = dedupeKeyOf(entity, prepared.values);
    const rule = entity.duplicateRule;
    if (rule && dedupeKey) {
      await records.lock(tx, ctx.accountId, dedupeLockOf(entity.id, dedupeKey));
      const existing = await records.findByDedupeKey(ctx.accountId, entity.id, dedupeKey, tx);
      if (existing) {
        if (rule.action === 'update' && ctx.sourceId !== null) {
          // A source token only creates records (interface: Source token): the handover becomes
          // a new record linked to the stored one, as the `create` rule makes it, and says so.
          warnings.push({
            key: 'record',
            reason: 'duplicate',
            message: `same ${rule.match.join(', ')} as ${existing.id}; a source token only creates records, so this is a new record linked to it`,
          });
          return outcome(await createRecord(ctx, tx, handover, prepared, existing.id, true), true, false);
        }
        if (rule.action === 'update') {
          keptInStage(existing);
          return outcome(
            await updateRecord(ctx, tx, handover, prepared, existing, 'duplicate_rule'),
            false,
            true,
          );
        }
        if (rule.action === 'ignore') {
          warnings.push({
            key: 'record',
            reason: 'duplicate',
            message: `same ${rule.match.join(', ')} as ${existing.id}`,
          });
          keptInStage(existing);
          return outcome(existing, false, false);
        }
        return outcome(await createRecord(ctx, tx, handover, prepared, existing.id), true, false);
      }
    }
    return outcome(await createRecord(ctx, tx, handover, prepared, null), true, false);
  }

  /**
   * The `booking` node, in the transaction of the record (interface: rules 2 and 3): the
   * appointment or the link is written with the record, or neither.
   */
  async function book(ctx: IntakeContext, tx: Executor, handover: Handover, outcome: IntakeOutcome) {
    if (!handover.booking) return;
    const result = await booking.forIntake(tx, ctx.accountId, outcome.recordId, handover.booking, {
      actor: historyActor(ctx),
      requestId: ctx.requestId,
    });
    outcome.booking = result.booking;
    outcome.warnings.push(...result.warnings);
  }

  function logOutcome(ctx: IntakeContext, handover: Handover, result: IntakeOutcome, statusCode: number) {
    return {
      requestId: ctx.requestId,
      endpoint: ctx.endpoint,
      outcome: outcomeOf(result),
      statusCode,
      recordId: result.recordId,
      entityKey: result.entityKey,
      source: handover.source ?? ctx.sourceName ?? 'api',
      warnings: result.warnings,
      error: null,
    };
  }

  /** The log entry of a refused handover; what it names of the handover is what it gave. */
  function refusalEntry(
    ctx: IntakeContext,
    handover: { entity: string | null; source: string | null } | null,
    error: Pick<AppError, 'code' | 'status' | 'details'>,
  ) {
    return {
      requestId: ctx.requestId,
      endpoint: ctx.endpoint,
      outcome: 'refused',
      statusCode: error.status,
      recordId: null,
      entityKey: handover?.entity ? truncate(handover.entity, 200) : null,
      source: handover?.source ?? ctx.sourceName ?? 'api',
      warnings: error.details ?? [],
      error: error.code,
    };
  }

  /** The one log entry of a bulk call, listing every entry's outcome (decisions §10). */
  function bulkEntry(ctx: IntakeContext, entityKey: string | null, items: BulkLogItem[]): IntakeLogEntry {
    return {
      requestId: ctx.requestId,
      endpoint: ctx.endpoint,
      outcome: 'bulk',
      statusCode: 200,
      recordId: null,
      entityKey: entityKey === null ? null : truncate(entityKey, 200),
      source: ctx.sourceName ?? 'api',
      warnings: [],
      error: null,
      items,
    };
  }

  async function logRefusal(ctx: IntakeContext, handover: Handover | null, error: AppError) {
    await logRefusals(ctx, [{ handover, error }]);
  }

  async function logRefusals(
    ctx: IntakeContext,
    refusals: { handover: Pick<Handover, 'entity' | 'source'> | null; error: AppError }[],
  ) {
    for (const { error } of refusals) loggedRefusals.add(error);
    if (ctx.loggedByCall) return;
    await intakeLog
      .log(
        ctx.accountId,
        refusals.map(({ handover, error }) => refusalEntry(ctx, handover, error)),
      )
      .catch(() => {});
  }

  return {
    checkKey,

    /** Logs refusals found before a handover was read, e.g. bulk entries refused at the edge. */
    logRefusals,

    /**
     * Logs the refusal a call was answered with, unless the service logged it already: what the
     * edge refused before a lead was read (the body's schema, text the database cannot store,
     * size and encoding, an idempotency key, a website form's origin) is an intake call too
     * (decisions §10: "every intake call is logged"). `named` is what the body named, where it
     * is text. Refusals of credentials and rate limits, and 5xx, are not logged; nor is any
     * refusal of a remembered API key that turns out revoked (no trace, as elsewhere).
     */
    async logCallRefusal(
      ctx: IntakeContext,
      named: { entity: unknown; source: unknown },
      error: AppError,
    ): Promise<void> {
      if (error.status >= 500 || UNLOGGED_REFUSALS.has(error.code) || loggedRefusals.has(error)) return;
      loggedRefusals.add(error);
      // A bulk call's entries are logged with the call, as its items.
      if (ctx.loggedByCall) return;
      try {
        await checkKey(ctx);
      } catch {
        return;
      }
      // The details name what was refused, unstorable characters written as `\uXXXX` (as the
      // answer names them), so that the entry can be stored.
      const details = error.details?.map((detail) => ({
        key: escapeUnstorable(detail.key),
        reason: detail.reason,
        message: escapeUnstorable(detail.message),
      }));
      await intakeLog
        .log(ctx.accountId, [
          refusalEntry(
            ctx,
            { entity: loggedText(named.entity, 200), source: loggedText(named.source, 100) },
            {
              code: error.code,
              status: error.status,
              details,
            },
          ),
        ])
        .catch(() => {});
    },

    /**
     * Logs a call answered with an idempotency key's stored answer (decisions §10: every intake
     * call is logged): outcome `replayed`, the status it was answered with, and the record id or
     * error code that answer names. Nothing else was written.
     */
    async logReplay(
      ctx: IntakeContext,
      named: { entity: unknown; source: unknown },
      answer: { status: number; body: unknown },
    ): Promise<void> {
      const body: Record<string, unknown> =
        typeof answer.body === 'object' && answer.body !== null
          ? (answer.body as Record<string, unknown>)
          : {};
      await intakeLog
        .log(ctx.accountId, [
          {
            requestId: ctx.requestId,
            endpoint: ctx.endpoint,
            outcome: 'replayed',
            statusCode: answer.status,
            recordId: typeof body.id === 'string' && UUID.test(body.id) ? body.id : null,
            entityKey: loggedText(named.entity, 200),
            source: loggedText(named.source, 100) ?? ctx.sourceName ?? 'api',
            warnings: [],
            error: typeof body.error === 'string' ? truncate(body.error, 100) : null,
          },
        ])
        .catch(() => {});
    },

    /** The one log entry of a bulk call (its entries were taken in with `loggedByCall`). */
    bulkEntry,

    /** Writes the one log entry of a bulk call (its entries were taken in with `loggedByCall`). */
    async logBulkCall(ctx: IntakeContext, entityKey: string | null, items: BulkLogItem[]) {
      await intakeLog.log(ctx.accountId, [bulkEntry(ctx, entityKey, items)]);
    },

    /**
     * The warnings a handover's answer would carry from reading it against its entity (the
     * handover's own, unmapped fields), without writing anything; none of the entity's when it
     * would be refused. A filled trap's answer carries them, as a created record's would.
     */
    async warningsOf(ctx: IntakeContext, handover: Handover): Promise<Warning[]> {
      try {
        return (await prepare(ctx, handover)).warnings;
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        return [...handover.warnings];
      }
    },

    /**
     * Logs a post whose trap field was filled (decisions §13): answered as a success, stored as
     * nothing but this entry. `answered` is the status the sender was given.
     */
    async logSpam(ctx: IntakeContext, entity: string | null, answered: number, warnings: Warning[]) {
      await intakeLog.log(ctx.accountId, [
        {
          requestId: ctx.requestId,
          endpoint: ctx.endpoint,
          outcome: 'spam',
          statusCode: answered,
          recordId: null,
          entityKey: entity === null ? null : truncate(entity, 200),
          source: ctx.sourceName ?? 'api',
          warnings,
          error: null,
        },
      ]);
    },

    /**
     * An idempotent request's first try, before any claim: a new record that the grouped
     * statement can write (what `createFast` groups) is written with its idempotency key's row,
     * done and holding the answer, in one statement with the other creations of the moment. Only
     * a key no row holds is taken (its row's insert decides); for anything else (the key is held
     * or stored, a unique rule refused the record, an error, a revoked key) nothing was written
     * and the answer is undefined: the request then goes the claiming way (IdempotencyService).
     */
    async intakeOneClaiming(
      ctx: IntakeContext,
      handover: Handover,
      answer: (outcome: IntakeOutcome) => unknown,
      claim: { ref: IdempotencyRef; requestHash: string; ttlHours: number },
    ): Promise<{ status: number; body: unknown } | undefined> {
      if (concurrentCreates === 0 || ctx.loggedByCall) return undefined;
      if (handover.documents.length > 0 || handover.booking || handover.distribution) return undefined;
      let prepared: Prepared;
      try {
        prepared = await prepare(ctx, handover);
      } catch {
        // A refusal is an answer to store: the claiming way gives and stores it.
        return undefined;
      }
      const { entity } = prepared;
      if (
        entity.duplicateRule?.action === 'create' ||
        missingRequired(entity, prepared.values).length > 0 ||
        prepared.assigneeId !== null ||
        prepared.viewerIds.length > 0
      )
        return undefined;
      const row = newRecordRow(ctx, handover, prepared, null);
      const outcome: IntakeOutcome = {
        recordId: row.id,
        entityKey: entity.key,
        created: true,
        updated: false,
        createdAt: new Date().toISOString(),
        email: givenEmailOf(prepared),
        warnings: [...prepared.warnings],
      };
      const body = answer(outcome);
      const item = newRecordItem(ctx, row, handover, entity.key, outcome.warnings);
      const grouped = await groupedCreates
        .submit(ctx.accountId, {
          ...item,
          uncheckedKeyId: ctx.key && !ctx.key.checked ? ctx.key.keyId : null,
          answer: {
            ...claim.ref,
            requestHash: claim.requestHash,
            statusCode: 201,
            body,
            ttlHours: claim.ttlHours,
          },
        })
        // A statement that failed as a whole wrote nothing: the claiming way takes it alone.
        .catch(() => null);
      if (grouped?.kind !== 'created') return undefined;
      if (ctx.key) ctx.key.checked = true;
      return { status: 201, body };
    },

    /**
     * Takes in one record. `answer` turns the outcome into the response body, which is stored
     * with the idempotency key (when there is one) in the same transaction as the write.
     */
    async intakeOne(
      ctx: IntakeContext,
      handover: Handover,
      answer: (outcome: IntakeOutcome) => unknown,
      store?: StoreAnswer,
    ): Promise<{ status: number; body: unknown; outcome: IntakeOutcome }> {
      let fetched: FetchedBatch | null = null;
      try {
        const prepared = await prepare(ctx, handover);
        const fast = await createFast(ctx, handover, prepared, answer, store);
        if (fast) return fast;
        await checkKey(ctx);
        // Documents are fetched before the transaction: no network call holds it open.
        if (handover.documents.length > 0) {
          fetched = await documents.fetchFor(ctx.accountId, prepared.entity.id, handover.documents, {
            scope: null,
            allowPool: true,
          });
        }
        const batch = fetched;
        const inTransaction = () =>
          db.transaction().execute(async (tx) => {
            const outcome = await write(ctx, tx, handover, prepared);
            await book(ctx, tx, handover, outcome);
            if (batch) {
              const skip = !outcome.created && !outcome.updated;
              if (!skip) {
                await documents.attach(
                  {
                    accountId: ctx.accountId,
                    actor: historyActor(ctx),
                    requestId: ctx.requestId,
                    newRecord: outcome.created,
                  },
                  outcome.recordId,
                  batch,
                  tx,
                );
              }
              outcome.warnings.push(...batch.warnings);
            }
            const run = await distributeWithin(ctx, tx, handover, outcome);
            const status = answeredStatus(ctx, outcome.created ? 201 : 200);
            const body = answer(outcome);
            if (!ctx.loggedByCall) {
              await intakeLog.log(ctx.accountId, [logOutcome(ctx, handover, outcome, status)], tx);
            }
            // With deliveries to wait for, the final answer comes after them: repeats wait.
            if (store) await store.save(tx, { status, body }, run !== null);
            return { status, body, outcome, run };
          });
        // A concurrent handover may create the same record between our look-up and our insert;
        // the unique index refuses ours, and a second pass finds and updates theirs.
        const result = await inTransaction().catch((error: unknown) => {
          if (isUniqueViolation(error)) return inTransaction();
          throw error;
        });
        // An ignored duplicate keeps nothing of the handover, documents included.
        if (!result.outcome.created && !result.outcome.updated) await documents.discard(batch);
        if (!result.run || !distribution) return result;
        // After the commit the deliveries' first attempts are awaited (decisions §8); the stored
        // answer of an idempotency key becomes the one given here.
        await distribution.awaitFirstAttempts(ctx.accountId, result.run);
        result.outcome.distribution = distributionAnswerFor(
          ctx,
          await distribution.startAnswer(ctx.accountId, result.run),
        );
        const body = answer(result.outcome);
        if (store) await store.save(db, { status: result.status, body });
        return { status: result.status, body, outcome: result.outcome };
      } catch (error) {
        await documents.discard(fetched);
        if (error instanceof AppError && error.code !== 'unauthorized') {
          // A revoked key learns nothing about its request and leaves no trace in the log.
          await checkKey(ctx);
          await logRefusal(ctx, handover, error);
        }
        throw error;
      }
    },

    /**
     * Takes in many handovers at once: the new records among them (no documents, no `create`
     * rule, nothing missing) are written in one statement; every other entry, and every entry a
     * unique rule refused, answers `fallback` for the caller to take in on its own.
     * `logCall` makes the call's one log entry from the results as they will be when every new
     * record is written (called only when no entry falls back); the statement writes it with the
     * records when they all are, and `logged` says so. `handovers` is emptied before the
     * statement runs: nothing of an entry stays reachable through it while the statement is
     * awaited.
     */
    async intakeBatch(
      ctx: IntakeContext,
      handovers: Handover[],
      /** Made before the statement writes: an answer that names the write time cannot be one. */
      answer: (outcome: Omit<IntakeOutcome, 'createdAt'>) => unknown,
      logCall?: (results: BatchResult[]) => IntakeLogEntry | null,
    ): Promise<{ results: BatchResult[]; logged: boolean }> {
      const results: BatchResult[] = handovers.map(() => ({ kind: 'fallback' }));
      const batch: { index: number; row: NewRecordRow; prepared: Prepared; handover: Handover }[] = [];
      const definitions = await entities.all(ctx.accountId);
      // An index loop: `entries()` makes a pair for each entry, which the await in the loop keeps
      // the compiler from doing without.
      for (let index = 0; index < handovers.length; index++) {
        const handover = handovers[index]!;
        try {
          refuseNodesBeyondPermissions(ctx, handover);
          const pending = prepareWith(ctx, handover, entityNamed(definitions, handover.entity));
          const prepared = pending instanceof Promise ? await pending : pending;
          const { entity } = prepared;
          if (
            handover.documents.length > 0 ||
            handover.booking ||
            handover.distribution ||
            entity.duplicateRule?.action === 'create' ||
            missingRequired(entity, prepared.values).length > 0 ||
            prepared.assigneeId !== null ||
            prepared.viewerIds.length > 0
          ) {
            continue;
          }
          batch.push({ index, row: newRecordRow(ctx, handover, prepared, null), prepared, handover });
        } catch (error) {
          if (!(error instanceof AppError)) throw error;
          await logRefusal(ctx, handover, error);
          results[index] = { kind: 'error', error };
        }
      }
      // A key taken from memory is checked by the statement that writes (no statement of its own).
      if (batch.length === 0) {
        await checkKey(ctx);
        return { results, logged: false };
      }
      // Made once an entry, before the statement: the call's log entry lists them, and they are
      // the answers of the entries the statement creates.
      const answers = batch.map(
        ({ row, prepared }): BatchResult => ({
          kind: 'done',
          status: 201,
          body: answer({
            recordId: row.id,
            entityKey: prepared.entity.key,
            created: true,
            updated: false,
            email: givenEmailOf(prepared),
            warnings: [...prepared.warnings],
          }),
        }),
      );
      let callLog: IntakeLogEntry | null = null;
      if (
        logCall &&
        batch.length + results.filter((result) => result.kind === 'error').length === handovers.length
      ) {
        const expected = [...results];
        for (const [position, item] of batch.entries()) expected[item.index] = answers[position]!;
        callLog = logCall(expected);
      }
      const uncheckedKeyId = ctx.key && !ctx.key.checked ? ctx.key.keyId : null;
      const items = batch.map(({ row, prepared, handover }) => ({
        ...newRecordItem(ctx, row, handover, prepared.entity.key, prepared.warnings),
        uncheckedKeyId,
      }));
      // What the answers need after the statement: nothing else of an entry is held meanwhile.
      // The lists are emptied rather than left to go out of scope: a suspended async function
      // keeps its locals (and the caller its handovers) until it ends, and objects alive across
      // the statement's wait outlive two young-generation collections, are promoted, and then
      // cost full collections (docs/decisions.md, "Nothing of an entry held during the wait").
      const written = batch.map(({ index, row }) => ({ index, id: row.id }));
      batch.length = 0;
      handovers.length = 0;
      const { created, keyRevoked, logged } = await createMany(ctx.accountId, items, callLog);
      if (keyRevoked.size > 0) refuseRevokedKey(ctx);
      if (ctx.key) ctx.key.checked = true;
      for (const [position, { index, id }] of written.entries()) {
        if (created.has(id)) results[index] = answers[position]!;
      }
      return { results, logged };
    },

    /**
     * Takes in many records all or nothing (S1 bulk): every entry is checked first, then all are
     * written in one transaction.
     */
    async intakeAll<Body>(
      ctx: IntakeContext,
      handovers: Handover[],
      answer: (outcomes: IntakeOutcome[]) => Body,
      /** An idempotency key's answer is stored in the leads' transaction (S1 answers 200). */
      store?: StoreAnswer,
    ): Promise<Body> {
      await checkKey(ctx);
      const prepared: Prepared[] = [];
      const problems: ValidationDetail[] = [];
      for (const [index, handover] of handovers.entries()) {
        try {
          const entry = await prepare(ctx, handover);
          for (const detail of missingRequired(entry.entity, entry.values)) {
            problems.push({ ...detail, key: `batch.${index}.${detail.key}` });
          }
          prepared.push(entry);
        } catch (error) {
          if (!(error instanceof AppError)) throw error;
          // Problems with details are gathered over the leads; a refusal without (a node beyond
          // the key's permissions) and an unknown entity are the whole call's answer.
          if (error.code === 'unknown_entity' || !error.details) throw error;
          for (const detail of error.details)
            problems.push({ ...detail, key: `batch.${index}.${detail.key}` });
        }
      }
      if (problems.length > 0) {
        const error = new AppError('validation_failed', { details: problems });
        await logRefusal(ctx, handovers[0] ?? null, error);
        throw error;
      }
      return db.transaction().execute(async (tx) => {
        const outcomes: IntakeOutcome[] = [];
        for (const [index, handover] of handovers.entries()) {
          const outcome = await write(ctx, tx, handover, prepared[index]!);
          await book(ctx, tx, handover, outcome);
          outcomes.push(outcome);
        }
        // One entry for the call, listing each lead's outcome (decisions §10).
        const items = outcomes.map(
          (outcome, index): BulkLogItem => ({
            index,
            status: outcomeOf(outcome),
            record_id: outcome.recordId,
            ...(outcome.warnings.length > 0 ? { warnings: outcome.warnings } : {}),
          }),
        );
        await intakeLog.log(ctx.accountId, [bulkEntry(ctx, handovers[0]?.entity ?? null, items)], tx);
        const body = answer(outcomes);
        if (store) await store.save(tx, { status: 200, body });
        return body;
      });
    },

    async listLog(accountId: string, query: IntakeLogQuery) {
      const limit = query.limit ?? 100;
      const filter: IntakeLogFilter = {
        outcome: query.outcome,
        endpoint: query.endpoint,
        source: query.source,
        entity: query.entity,
        recordId: query.record_id,
        requestId: query.request_id,
        from: timeBound(query.created_from, false),
        before: timeBound(query.created_to, true),
      };
      refuseUnstorableTimes({ created_from: filter.from, created_to: filter.before });
      const rows = await intakeLog.list(accountId, filter, limit + 1, decodeCursor(query.cursor));
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        entries: page.map((row) => ({
          id: row.id,
          request_id: row.request_id,
          endpoint: row.endpoint,
          outcome: row.outcome,
          status_code: row.status_code,
          record_id: row.record_id,
          entity: row.entity_key,
          source: row.source,
          warnings: row.warnings as Warning[],
          error: row.error,
          items: (row.items as BulkLogItem[] | null) ?? null,
          created_at: iso(row.created_at),
        })),
        next_cursor: rows.length > limit && last ? encodeCursor(last.created_at, last.id) : null,
      };
    },
  };
}

export type IntakeService = ReturnType<typeof createIntakeService>;
