import { isDeepStrictEqual } from 'node:util';
import { inTransaction } from '../../db/transaction.ts';
import type { Db, Executor, Tx } from '../../db/types.ts';
import { AppError, notFound, type ValidationDetail } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import type { JobEnqueuer } from '../../jobs/queue.ts';
import { matchingForm } from '../../lib/text.ts';
import {
  dedupeKeyIsUnique,
  dedupeKeyOf,
  dedupeLockOf,
  emailFieldOf,
  emailOf,
  normalizeKey,
} from '../records/field-values.ts';
import type { RecordsRepo } from '../records/records.repo.ts';
import { recomputeDuplicateKeysJob } from './entities.jobs.ts';
import {
  DUPLICATE_ACTIONS,
  type DuplicateAction,
  type DuplicateRule,
  type EntityDef,
  FIELD_TYPES,
  type FieldDef,
  type FieldType,
  FORMATS_BY_TYPE,
  ROLES,
  type Role,
} from './entities.model.ts';
import type { EntitiesRepo } from './entities.repo.ts';
import { MAX_ACTIVE_ENTITIES, MAX_ENTITIES } from './entities.schemas.ts';
import { RESERVED_FIELD_KEYS } from './reserved-keys.ts';

/** Records counted for a warning about kept values; beyond, the warning says "more than". */
const MAX_COUNTED_VALUES = 10_000;

/** Entity definitions change rarely and are read on every intake; other nodes see a change within this time. */
const CACHE_TTL_MS = 2_000;
/** Records re-keyed in one transaction of a duplicate-key recompute. */
const RECOMPUTE_BATCH_SIZE = 500;
/** Times a batch is run again at once after a conflict with intake (isRetryableConflict). */
const RECOMPUTE_BATCH_ATTEMPTS = 5;
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface FieldInput {
  key: string;
  label: string;
  type: string;
  format?: string | null;
  required?: boolean;
  options?: string[];
  role?: string | null;
}

export interface EntityDefinitionInput {
  name: string;
  fields: FieldInput[];
  duplicate_rule?: { match: string[]; action: string } | null;
  pipelines?: { name: string; stages: string[] }[];
  archived?: boolean;
}

/**
 * The key of an earlier field whose `name` (a key or a label) intake cannot tell from this one
 * once normalised (normalizeKey); else records this field's under that form and answers undefined.
 */
function earlierAlike(seen: Map<string, string>, name: string, fieldKey: string): string | undefined {
  const form = normalizeKey(name);
  const earlier = seen.get(form);
  if (earlier === undefined) seen.set(form, fieldKey);
  return earlier;
}

function checkDefinition(input: EntityDefinitionInput): {
  fields: FieldDef[];
  duplicateRule: DuplicateRule | null;
} {
  const problems: ValidationDetail[] = [];
  const seenKeys = new Set<string>();
  /** Keys as intake compares a name with them (normalizeKey), with the key giving each. */
  const seenNormalizedKeys = new Map<string, string>();
  const seenRoles = new Set<string>();
  /** Labels as intake compares them (normalizeKey), with the key of the first field giving each. */
  const seenLabels = new Map<string, string>();
  const fields: FieldDef[] = [];
  for (const [index, field] of input.fields.entries()) {
    const at = `fields.${index}`;
    if (seenKeys.has(field.key)) {
      problems.push({
        key: `${at}.key`,
        reason: 'duplicate',
        message: `field key ${field.key} appears twice`,
      });
    } else {
      // A name is matched to a key after normalising too (`FirstName` means `first_name`): two
      // keys alike that way (`first_name`, `firstname`) would leave such a name to one of them.
      const keyOf = earlierAlike(seenNormalizedKeys, field.key, field.key);
      if (keyOf !== undefined) {
        problems.push({
          key: `${at}.key`,
          reason: 'duplicate',
          message: `field key ${field.key} matches the key ${keyOf} once case, _ and - are ignored`,
        });
      }
    }
    seenKeys.add(field.key);
    // Intake takes these names at the top level of a record for itself (a top-level `note` is the
    // record's note): a field keyed so could never be filled from there, and nothing would say so.
    if (RESERVED_FIELD_KEYS.includes(field.key)) {
      problems.push({
        key: `${at}.key`,
        reason: 'not_allowed',
        message: `${field.key} is a name intake takes at the top level of a record for itself; give the field another key`,
      });
    }
    // Intake matches a name to a field by its label too: two labels it cannot tell apart would
    // send a value to one of the fields without a word. A label like another field's key is
    // allowed (the key wins).
    const labelOf = earlierAlike(seenLabels, field.label, field.key);
    if (labelOf !== undefined) {
      problems.push({
        key: `${at}.label`,
        reason: 'duplicate',
        message: `field label ${field.label} matches the label of field ${labelOf} (case, spaces, _ and - are ignored)`,
      });
    }
    if (!(FIELD_TYPES as readonly string[]).includes(field.type)) {
      problems.push({
        key: `${at}.type`,
        reason: 'not_allowed',
        message: `type must be one of ${FIELD_TYPES.join(', ')}`,
      });
      continue;
    }
    const type = field.type as FieldType;
    const format = field.format ?? null;
    const allowedFormats = FORMATS_BY_TYPE[type] ?? [];
    if (format !== null && !allowedFormats.includes(format)) {
      problems.push({
        key: `${at}.format`,
        reason: 'not_allowed',
        message: allowedFormats.length
          ? `format of a ${type} field must be one of ${allowedFormats.join(', ')}`
          : `a ${type} field has no format`,
      });
    }
    const isSelect = type === 'select' || type === 'multiselect';
    let options: string[] | null = null;
    if (isSelect) {
      if (!field.options || field.options.length === 0) {
        problems.push({ key: `${at}.options`, reason: 'required', message: 'a select field needs options' });
      } else if (new Set(field.options.map(matchingForm)).size !== field.options.length) {
        // Intake matches an option once case and surrounding blanks are ignored (field-values.ts):
        // of two options alike that way, the second could never be chosen.
        problems.push({
          key: `${at}.options`,
          reason: 'duplicate',
          message: 'options must be distinct, also once case and blanks around them are ignored',
        });
      }
      options = field.options ?? [];
    } else if (field.options !== undefined && field.options.length > 0) {
      problems.push({
        key: `${at}.options`,
        reason: 'not_allowed',
        message: 'only select fields have options',
      });
    }
    const role = field.role ?? null;
    if (role !== null) {
      if (!(ROLES as readonly string[]).includes(role)) {
        problems.push({
          key: `${at}.role`,
          reason: 'not_allowed',
          message: `role must be one of ${ROLES.join(', ')}`,
        });
      } else if (seenRoles.has(role)) {
        problems.push({
          key: `${at}.role`,
          reason: 'duplicate',
          message: `role ${role} is given to two fields`,
        });
      } else if (type !== 'text') {
        problems.push({ key: `${at}.role`, reason: 'not_allowed', message: 'roles belong to text fields' });
      }
      seenRoles.add(role);
    }
    fields.push({
      key: field.key,
      label: field.label,
      type,
      format,
      required: field.required ?? false,
      options,
      role: role as Role | null,
    });
  }

  let duplicateRule: DuplicateRule | null = null;
  if (input.duplicate_rule) {
    const { match, action } = input.duplicate_rule;
    if (new Set(match).size !== match.length) {
      problems.push({
        key: 'duplicate_rule.match',
        reason: 'duplicate',
        message: 'each field key once',
      });
    }
    for (const key of match) {
      const field = fields.find((f) => f.key === key);
      if (!field) {
        problems.push({ key: 'duplicate_rule.match', reason: 'unknown_field', message: `no field ${key}` });
      } else if (['file', 'files', 'multiselect'].includes(field.type)) {
        problems.push({
          key: 'duplicate_rule.match',
          reason: 'not_allowed',
          message: `${key} cannot be compared`,
        });
      }
    }
    if (!(DUPLICATE_ACTIONS as readonly string[]).includes(action)) {
      problems.push({
        key: 'duplicate_rule.action',
        reason: 'not_allowed',
        message: 'action must be update, ignore or create',
      });
    }
    duplicateRule = { match, action: action as DuplicateAction };
  }

  const pipelineNames = new Set<string>();
  for (const [index, pipeline] of (input.pipelines ?? []).entries()) {
    if (pipelineNames.has(pipeline.name)) {
      problems.push({
        key: `pipelines.${index}.name`,
        reason: 'duplicate',
        message: `pipeline ${pipeline.name} appears twice`,
      });
    }
    pipelineNames.add(pipeline.name);
    if (new Set(pipeline.stages).size !== pipeline.stages.length) {
      problems.push({
        key: `pipelines.${index}.stages`,
        reason: 'duplicate',
        message: 'stage names must be distinct',
      });
    }
  }
  if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
  return { fields, duplicateRule };
}

/** S2 field item (interface: Entity; decisions §3). */
function presentField(field: FieldDef) {
  return {
    key: field.key,
    label: field.label,
    type: field.type,
    format: field.format,
    required: field.required,
    ...(field.options ? { options: field.options } : {}),
    role: field.role,
  };
}

export function presentEntityS2(entity: EntityDef) {
  return {
    key: entity.key,
    name: entity.name,
    archived: entity.archived,
    fields: entity.fields.map(presentField),
  };
}

export function presentEntityS1(entity: EntityDef) {
  return {
    id: entity.id,
    slug: entity.key,
    label: entity.name,
    fields: entity.fields.map((field) => ({
      key: field.key,
      label: field.label,
      type: field.type,
      required: field.required,
      ...(field.options ? { options: field.options } : {}),
    })),
    // What S1's `status:<pipeline>` key takes: a status name or its id, in that pipeline.
    pipelines: entity.pipelines.map((pipeline) => ({
      id: pipeline.id,
      name: pipeline.name,
      statuses: pipeline.stages.map((stage) => ({ id: stage.id, name: stage.name })),
    })),
  };
}

export function presentEntitySettings(entity: EntityDef) {
  return {
    id: entity.id,
    ...presentEntityS2(entity),
    duplicate_rule: entity.duplicateRule,
    pipelines: entity.pipelines.map((p) => ({ name: p.name, stages: p.stages.map((s) => s.name) })),
    duplicate_keys: {
      status: entity.duplicateKeys.recomputing ? ('recomputing' as const) : ('current' as const),
      done: entity.duplicateKeys.done,
      total: entity.duplicateKeys.total,
    },
    created_at: iso(entity.createdAt),
    updated_at: iso(entity.updatedAt),
  };
}

/**
 * What depends on an entity's definition elsewhere (the CRM's automations, distribution rules):
 * the problems that a change from `before` to `after` leaves behind, read in the change's
 * transaction. Any refuses the change with 422, so that a mistake is found when the definition is
 * saved, not when a record moves.
 */
export type DefinitionGuard = (
  tx: Executor,
  accountId: string,
  before: EntityDef,
  after: EntityDef,
) => Promise<ValidationDetail[]>;

export interface EntitiesServiceDeps {
  db: Db;
  repo: EntitiesRepo;
  /** Re-keys the records when a duplicate rule changes. */
  records: RecordsRepo;
  /** Writes the recompute job; every serving process has one (absent only in tests). */
  jobs?: JobEnqueuer;
  now?: () => number;
  /**
   * How long a process keeps an account's definitions (2 s). A changed duplicate rule's
   * recompute starts 1 s after that, when every process reads the new rule; tests of a single
   * process shorten it.
   */
  cacheTtlMs?: number;
}

/**
 * What a batch meets when intake writes the same keys at once: a unique violation (a record
 * written meanwhile took a key the batch marks unique), or a deadlock with a grouped creation
 * that inserts several keys the batch marks (PostgreSQL ends one of the two; intake retries its
 * creations one by one).
 */
function isRetryableConflict(error: unknown): boolean {
  const code = (error as { code?: string }).code;
  return code === '23505' || code === '40P01';
}

/** An account's entity by key (S2), or by slug or uuid (S1), among its definitions (`all`). */
export function entityNamed(entities: readonly EntityDef[], keyOrId: string): EntityDef | undefined {
  const byKey = entities.find((e) => e.key === keyOrId);
  if (byKey) return byKey;
  if (UUID_PATTERN.test(keyOrId)) return entities.find((e) => e.id === keyOrId.toLowerCase());
  return undefined;
}

export function createEntitiesService({
  db,
  repo,
  records,
  jobs,
  now = Date.now,
  cacheTtlMs = CACHE_TTL_MS,
}: EntitiesServiceDeps) {
  const cache = new Map<string, { loadedAt: number; entities: EntityDef[] }>();
  const guards: DefinitionGuard[] = [];

  /**
   * `tx`: a caller inside a transaction must pass it. On the embedded database the transaction
   * holds the only connection, so a look-up outside it (a cache miss) would wait for ever.
   */
  async function all(accountId: string, tx?: Executor): Promise<EntityDef[]> {
    const hit = cache.get(accountId);
    if (hit && now() - hit.loadedAt < cacheTtlMs) return hit.entities;
    const entities = await repo.loadAll(accountId, tx);
    cache.set(accountId, { loadedAt: now(), entities });
    // Bound the cache: accounts that stop sending fall out first.
    if (cache.size > 10_000) cache.delete(cache.keys().next().value as string);
    return entities;
  }

  return {
    all,

    /** Added once by each that depends on definitions (automations, distribution rules), made after the entities. */
    addDefinitionGuard(guard: DefinitionGuard) {
      guards.push(guard);
    },

    invalidate(accountId: string) {
      cache.delete(accountId);
    },

    /** By key (S2), or by slug or uuid (S1). Archived entities are found too; callers decide. */
    async find(accountId: string, keyOrId: string, tx?: Executor): Promise<EntityDef | undefined> {
      return entityNamed(await all(accountId, tx), keyOrId);
    },

    /**
     * The entity's fields as stored, locked until `tx` ends (an entity PUT waits for it): for a
     * write that must hold against the definition it was checked against. Undefined: no such entity.
     */
    async lockFields(accountId: string, entityId: string, tx: Tx): Promise<FieldDef[] | undefined> {
      return repo.lockFields(accountId, entityId, tx);
    },

    /** The settings view: read anew, so that a recompute's progress is current. */
    async settings(accountId: string): Promise<EntityDef[]> {
      cache.delete(accountId);
      return all(accountId);
    },

    async settingsOf(accountId: string, key: string): Promise<EntityDef> {
      cache.delete(accountId);
      const entity = (await all(accountId)).find((e) => e.key === key);
      if (!entity) throw notFound('Entity not found');
      return entity;
    },

    /**
     * `tx`: the caller's transaction, when the entity is part of a larger write. Stored values
     * that a changed type, format or option list may no longer fit are kept, and said in
     * `warnings` (see valuesKept). A changed
     * duplicate rule starts a recompute of the stored keys, enqueued in the same transaction.
     */
    async put(accountId: string, key: string, input: EntityDefinitionInput, tx?: Tx) {
      const checked = checkDefinition(input);
      const { saved, entities, warnings } = await inTransaction(db, tx, async (tx) => {
        await refuseBeyondLimits(accountId, key, input.archived ?? false, tx);
        const before = (await repo.loadAll(accountId, tx)).find((e) => e.key === key);
        const warnings = before ? await valuesKept(accountId, before, checked.fields, tx) : [];
        const saved = await repo.save(
          accountId,
          {
            key,
            name: input.name,
            archived: input.archived ?? false,
            fields: checked.fields,
            duplicateRule: checked.duplicateRule,
            pipelines: input.pipelines ?? [],
          },
          tx,
        );
        // The stored keys follow the rule, and the stored lower-case email (what notes look records
        // up by) the field with the email role: either change recomputes both.
        if (
          !saved.created &&
          (!isDeepStrictEqual(saved.previousRule, checked.duplicateRule) ||
            saved.previousEmailField !== emailFieldOf(checked.fields))
        ) {
          await restartDuplicateKeys(accountId, saved.id, tx);
        }
        // Read through the transaction: on the embedded database it holds the only connection.
        const entities = await repo.loadAll(accountId, tx);
        const after = entities.find((e) => e.id === saved.id);
        if (before && after) {
          // Decisions §7: what the change breaks is refused now (the transaction undoes the save).
          const problems: ValidationDetail[] = [];
          for (const guard of guards) problems.push(...(await guard(tx, accountId, before, after)));
          if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
        }
        return { saved, entities, warnings };
      });
      cache.delete(accountId);
      const entity = entities.find((e) => e.id === saved.id);
      if (!entity) throw new Error('saved entity not found');
      return {
        created: saved.created,
        entity: { ...presentEntitySettings(entity), ...(warnings.length > 0 ? { warnings } : {}) },
      };
    },

    /**
     * The recompute job's work: the entity's records in id order, a batch per transaction, the
     * position stored with each batch. Stops when a newer rule change superseded its version.
     */
    async recomputeDuplicateKeys(
      target: { accountId: string; entityId: string; version: number },
      signal: AbortSignal,
    ): Promise<{ rekeyed: number; superseded: boolean }> {
      let rekeyed = 0;
      for (;;) {
        if (signal.aborted)
          throw new Error('stopped before the recompute ended; it resumes where it stopped');
        const step = await recomputeBatch(target);
        rekeyed += step.rekeyed;
        if (step.superseded) return { rekeyed, superseded: true };
        if (step.finished) return { rekeyed, superseded: false };
      }
    },
  };

  /**
   * What a changed definition leaves unfitting among stored values, as warnings of the `PUT`
   * (the values are kept, never converted or dropped: decisions "A changed field keeps its
   * values"): per field whose type or format changed, the records holding a value; per select or
   * multiselect that lost options, the records holding one of them; per field made required, the
   * records without a value. Counted up to MAX_COUNTED_VALUES each.
   */
  async function valuesKept(
    accountId: string,
    before: EntityDef,
    fields: FieldDef[],
    tx: Tx,
  ): Promise<ValidationDetail[]> {
    const warnings: ValidationDetail[] = [];
    const count = async (key: string, among: string[] | null | 'none') => {
      const n = await repo.countHolding(accountId, before.id, key, among, MAX_COUNTED_VALUES, tx);
      const records =
        n > MAX_COUNTED_VALUES
          ? `More than ${MAX_COUNTED_VALUES.toLocaleString('en')} records`
          : n === 1
            ? '1 record'
            : `${n} records`;
      return { n, records, holds: n === 1 ? 'holds' : 'hold' };
    };
    for (const [index, field] of fields.entries()) {
      const old = before.fields.find((f) => f.key === field.key);
      if (!old) continue;
      if (field.required && !old.required) {
        const { n, records, holds } = await count(field.key, 'none');
        if (n > 0) {
          warnings.push({
            key: `fields.${index}.required`,
            reason: 'values_missing',
            message: `${records} ${holds} no value of ${field.key}, which is now required; nothing was filled in`,
          });
        }
      }
      if (old.type !== field.type || old.format !== field.format) {
        const { n, records, holds } = await count(field.key, null);
        if (n === 0) continue;
        const was = old.format ? `${old.type} (${old.format})` : old.type;
        const now = field.format ? `${field.type} (${field.format})` : field.type;
        warnings.push({
          key: `fields.${index}.${old.type !== field.type ? 'type' : 'format'}`,
          reason: 'values_kept',
          message: `${records} ${holds} a value of ${field.key} taken in as ${was}; kept as it is, not converted to ${now}`,
        });
      } else if (old.options && field.options) {
        const kept = new Set(field.options);
        const removed = old.options.filter((option) => !kept.has(option));
        if (removed.length === 0) continue;
        const { n, records, holds } = await count(field.key, removed);
        if (n === 0) continue;
        warnings.push({
          key: `fields.${index}.options`,
          reason: 'values_kept',
          message: `${records} ${holds} an option of ${field.key} the definition no longer lists; kept as it is`,
        });
      }
    }
    return warnings;
  }

  /**
   * A PUT that adds an entity, or brings an archived one back, within the account's limits: every
   * entity is loaded on each intake and listed whole. A PUT of one already counted passes, so an
   * account over a limit (from before it) can still change its entities.
   */
  async function refuseBeyondLimits(accountId: string, key: string, archived: boolean, tx: Tx) {
    // Serialises the account's entity PUTs, so that two additions cannot both see room for one.
    await repo.lockEntities(accountId, tx);
    const counts = await repo.countOthers(accountId, key, tx);
    if (counts.current === null && counts.total >= MAX_ENTITIES) {
      throw new AppError('validation_failed', {
        details: [
          {
            key: 'name',
            reason: 'too_many',
            message: `at most ${MAX_ENTITIES} entities per account, archived ones included; define an archived entity's key anew instead`,
          },
        ],
      });
    }
    if (!archived && counts.current !== 'active' && counts.active >= MAX_ACTIVE_ENTITIES) {
      throw new AppError('validation_failed', {
        details: [
          {
            key: counts.current === null ? 'name' : 'archived',
            reason: 'too_many',
            message: `at most ${MAX_ACTIVE_ENTITIES} entities per account that are not archived; archive one first`,
          },
        ],
      });
    }
  }

  async function restartDuplicateKeys(accountId: string, entityId: string, tx: Tx): Promise<void> {
    const total = await records.countOfEntity(accountId, entityId, tx);
    const version = await repo.restartDuplicateKeys(accountId, entityId, total, tx);
    if (total === 0) return;
    if (!jobs) throw new Error('a changed duplicate rule needs the job queue to recompute the stored keys');
    // Other nodes keep the old rule for up to the cache's lifetime: records they write meanwhile
    // are re-keyed too when the job starts after it.
    await jobs.enqueue(
      tx,
      recomputeDuplicateKeysJob,
      { accountId, entityId, version },
      { startAfter: new Date(now() + cacheTtlMs + 1_000) },
    );
  }

  async function recomputeBatch(target: { accountId: string; entityId: string; version: number }) {
    const { accountId, entityId, version } = target;
    for (let attempt = 1; ; attempt++) {
      try {
        return await db.transaction().execute(async (tx) => {
          const state = await repo.lockDuplicateKeys(accountId, entityId, tx);
          if (!state || state.version !== version || !state.recomputing) {
            return { rekeyed: 0, superseded: true, finished: true };
          }
          const batch = await records.valuesAfter(
            accountId,
            entityId,
            state.cursor,
            RECOMPUTE_BATCH_SIZE,
            tx,
          );
          const keyed = batch.map((record) => {
            const dedupeKey = dedupeKeyOf(
              { duplicateRule: state.rule },
              record.fields as Record<string, unknown>,
            );
            return {
              id: record.id,
              dedupe_key: dedupeKey,
              unique_wanted: dedupeKeyIsUnique({ duplicateRule: state.rule }, dedupeKey),
              email_lc: emailOf({ fields: state.fields }, record.fields as Record<string, unknown>),
            };
          });
          // Intake's locked path takes these locks too: a key is made unique by one side at a time.
          await records.lockAll(
            tx,
            accountId,
            keyed.flatMap((row) =>
              row.unique_wanted && row.dedupe_key ? [dedupeLockOf(entityId, row.dedupe_key)] : [],
            ),
          );
          await records.rekey(accountId, entityId, keyed, tx);
          const finished = batch.length < RECOMPUTE_BATCH_SIZE;
          await repo.advanceDuplicateKeys(
            accountId,
            entityId,
            { cursor: batch.at(-1)?.id ?? state.cursor, done: state.done + batch.length, finished },
            tx,
          );
          return { rekeyed: batch.length, superseded: false, finished };
        });
      } catch (error) {
        // The next run of the batch sees the records written meanwhile and leaves their keys shared.
        if (!isRetryableConflict(error) || attempt >= RECOMPUTE_BATCH_ATTEMPTS) throw error;
      }
    }
  }
}

export type EntitiesService = ReturnType<typeof createEntitiesService>;
