import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { Db, Executor } from '../../db/types.ts';
import { AppError, moduleNotEnabledInSetting, type ValidationDetail } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import type { JobEnqueuer } from '../../jobs/queue.ts';
import { decodeCursor, pageOf } from '../../lib/cursor.ts';
import { codePointLength, longerThan } from '../../lib/text.ts';
import type { MessageOutcome, OutboundService } from '../../outbound/outbound.service.ts';
import type { DistributionService } from '../distribution/distribution.service.ts';
import type { EntityDef } from '../entities/entities.model.ts';
import type { EntitiesService } from '../entities/entities.service.ts';
import { isNoteText } from '../notes/note-text.ts';
import type { NotesService } from '../notes/notes.service.ts';
import { recordEventData } from '../records/record-webhooks.ts';
import type { RecordsReadRepo, RecordsRepo } from '../records/records.repo.ts';
import type { RecordsService } from '../records/records.service.ts';
import { checkUrl } from '../webhooks/webhooks.service.ts';
import { runAutomationJob } from './automations.jobs.ts';
import type { AutomationInput, AutomationRow, AutomationsRepo } from './automations.repo.ts';
import type { ActionType } from './automations.schemas.ts';
import type { CrmService, MoveContext, StageMove } from './crm.service.ts';
import { resolveStage } from './crm.stages.ts';
import {
  looksLikeHtml,
  render,
  soleVariable,
  templateProblems,
  textOf,
  textOfHtml,
  variablesOf,
} from './templates.ts';

/** The outbound engine's purpose of automation webhooks, and the hook that learns their outcome. */
export const AUTOMATION_WEBHOOK = 'automation';
const OUTCOME_HOOK = 'crm.automation';
/** Moves that automations may make, one after another, from one request's move (decisions §7). */
export const MAX_CHAINED_MOVES = 10;
/** A note action's rendered text: at most what POST /api/v1/notes takes (code points). */
const MAX_NOTE_LENGTH = 10_000;
/** An email action's rendered subject: a header line's 998 characters (RFC 5322) less `Subject: `. */
const MAX_SUBJECT_LENGTH = 989;
const MAX_AUTOMATIONS = 500;
const EMAIL = /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/;

/** Members each action type takes (besides `type`); any other is refused, so that a typo is not ignored. */
const MEMBERS: Record<ActionType, string[]> = {
  webhook: ['url'],
  email: ['to', 'subject', 'body', 'record_token_fields', 'record_token_days'],
  note: ['body'],
  distribute: [],
  move_stage: ['pipeline', 'stage'],
};
const REQUIRED: Record<ActionType, string[]> = {
  webhook: ['url'],
  email: ['to', 'subject', 'body'],
  note: ['body'],
  distribute: [],
  move_stage: ['stage'],
};

export interface ActionInput {
  type: string;
  url?: string;
  to?: string;
  subject?: string;
  body?: string;
  record_token_fields?: string[];
  record_token_days?: number;
  pipeline?: string;
  stage?: string;
}

export interface AutomationSettings {
  name: string;
  entity: string;
  pipeline?: string;
  stage: string;
  action: ActionInput;
  enabled?: boolean;
}

/** The stored action: as configured, with the target stage's id for move_stage. */
type StoredAction = ActionInput & { stage_id?: string };

function present(row: AutomationRow) {
  const action = withoutStageId(row.config as unknown as StoredAction);
  return {
    id: row.id,
    name: row.name,
    entity: row.entity,
    pipeline: row.pipeline,
    stage: row.stage,
    action: action as unknown as Record<string, unknown>,
    enabled: row.enabled,
    // A webhook action's destination as an account webhook shows it: the engine disables it after
    // a 410 or failing for LEADS_WEBHOOK_DISABLE_AFTER_S, and its runs then fail destination_disabled.
    ...(row.destination_enabled !== null
      ? {
          destination: {
            enabled: row.destination_enabled,
            disabled_reason: row.destination_disabled_reason,
            failing_since: row.destination_failing_since ? iso(row.destination_failing_since) : null,
          },
        }
      : {}),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

/**
 * What an API key needs beside `settings` to set up an action, where the action does what the
 * key could not do itself: an email (to any address) and a webhook (to any URL) send records
 * out, so `records:read`, as an account webhook needs it; a distribution run delivers records to
 * paying partners, so `distribution`, as its endpoint needs it. Notes and stage moves need
 * nothing more.
 */
const PERMISSION_OF_ACTION: Readonly<Partial<Record<string, string>>> = {
  email: 'records:read',
  webhook: 'records:read',
  distribute: 'distribution',
};

/**
 * Refuses (403) an API key's automation whose action needs a permission the key lacks (decisions,
 * Credentials): else a key with `settings` alone would receive every record entering the stage,
 * or start paid deliveries. `permissions` is null for a signed-in person, whom the route's role
 * bounds.
 */
function refuseActionBeyondKey(type: string, permissions: readonly string[] | null): void {
  const needed = PERMISSION_OF_ACTION[type];
  if (!permissions || needed === undefined || permissions.includes(needed)) return;
  throw new AppError('forbidden', {
    message: `a ${type} action needs ${needed} beside settings for an API key`,
  });
}

function notFound(): AppError {
  return new AppError('not_found', { message: 'Automation not found' });
}

/** Checks an action against the entity: unknown stage, field or type is refused now, never at run time. */
function checkAction(
  entity: EntityDef,
  action: ActionInput,
  modules: string[],
  problems: ValidationDetail[],
): StoredAction {
  const type = action.type as ActionType;
  const allowed = MEMBERS[type];
  for (const member of Object.keys(action)) {
    if (member !== 'type' && !allowed.includes(member)) {
      problems.push({
        key: `action.${member}`,
        reason: 'not_allowed',
        message: `a ${type} action takes no ${member}`,
      });
    }
  }
  for (const member of REQUIRED[type]) {
    if ((action as unknown as Record<string, unknown>)[member] === undefined) {
      problems.push({
        key: `action.${member}`,
        reason: 'required',
        message: `a ${type} action needs ${member}`,
      });
    }
  }
  const stored: StoredAction = { ...action };
  if (type === 'webhook' && action.url !== undefined) {
    const urlProblems: ValidationDetail[] = [];
    checkUrl(action.url, urlProblems);
    problems.push(...urlProblems.map((p) => ({ ...p, key: 'action.url' })));
  }
  if (type === 'email' || type === 'note') {
    for (const member of ['subject', 'body'] as const) {
      const template = action[member];
      if (template !== undefined) problems.push(...templateProblems(template, entity, `action.${member}`));
    }
  }
  if (type === 'note' && action.body !== undefined && variablesOf(action.body).includes('record_token')) {
    // Only an email mints a record token (for its record_token_fields): in a note it would always be empty.
    problems.push({
      key: 'action.body',
      reason: 'not_allowed',
      message: 'a note mints no record token: {{record_token}} is for email actions with record_token_fields',
    });
  }
  if (type === 'email') {
    const to = action.to?.trim();
    if (to !== undefined) {
      // An address, or exactly one {{field}} (blanks around it allowed): text around a variable
      // (`x{{email}}`, `{{email}}.evil.com`) would send to an address nobody configured.
      const variable = soleVariable(to);
      if (variable !== null) {
        const field = entity.fields.find((f) => f.key === variable);
        if (!field) {
          problems.push({
            key: 'action.to',
            reason: 'unknown_field',
            message: `{{${variable}}} names no field of ${entity.key}`,
          });
        } else if (field.format !== 'email' && field.role !== 'email') {
          // Decisions §7: `{{field}}` names an email field; another is refused now, not at run time.
          problems.push({
            key: 'action.to',
            reason: 'not_allowed',
            message: `${field.key} holds no email address: name a field with the email format or role`,
          });
        }
      } else if (!EMAIL.test(to) || to.includes('{{') || to.includes('}}')) {
        problems.push({
          key: 'action.to',
          reason: 'invalid_format',
          message: 'an email address, or exactly one {{field}} with nothing around it',
        });
      }
    }
    for (const field of action.record_token_fields ?? []) {
      if (!entity.fields.some((f) => f.key === field)) {
        problems.push({
          key: 'action.record_token_fields',
          reason: 'unknown_field',
          message: `no field ${field}`,
        });
      }
    }
    const usesToken = [action.subject, action.body].some((t) => t && variablesOf(t).includes('record_token'));
    if (usesToken && !action.record_token_fields) {
      problems.push({
        key: 'action.record_token_fields',
        reason: 'required',
        message: '{{record_token}} needs the fields it opens',
      });
    }
  }
  if (type === 'distribute' && !modules.includes('distribution')) {
    problems.push({
      key: 'action.type',
      reason: 'module_not_enabled',
      message: 'distribute needs the distribution module',
    });
  }
  if (type === 'move_stage' && action.stage !== undefined) {
    const placement = resolveStage(entity, { stage: action.stage, pipeline: action.pipeline }, 'action.');
    if ('reason' in placement) problems.push(placement);
    else
      Object.assign(stored, {
        pipeline: placement.pipeline.name,
        stage: placement.stage.name,
        stage_id: placement.stage.id,
      });
  }
  return stored;
}

/** An action as it was given: the stored one without the id of a move's target stage. */
function withoutStageId(stored: StoredAction): ActionInput {
  const { stage_id: _, ...action } = stored;
  return action;
}

/** Whether an action names the stored `move_stage` target (by its name or id, its pipeline by name or not at all). */
function keepsTarget(action: ActionInput, stored: StoredAction): boolean {
  return (
    action.type === 'move_stage' &&
    stored.type === 'move_stage' &&
    stored.stage_id !== undefined &&
    action.stage !== undefined &&
    (action.stage === stored.stage || action.stage.toLowerCase() === stored.stage_id) &&
    (action.pipeline === undefined || action.pipeline === stored.pipeline)
  );
}

/** The reason of an entity change refused because an enabled automation needs what it changes. */
export const USED_BY_AUTOMATION = 'used_by_automation';

/**
 * What one automation needs of its entity's definition and does not find in it: its own stage, and
 * the problems of its action (the checks of its configuration). Keyed `automations.<id>.<member>`.
 */
function dependencyProblems(entity: EntityDef, row: AutomationRow): ValidationDetail[] {
  const at = `automations.${row.id}`;
  const named = `automation "${row.name}"`;
  const problems: ValidationDetail[] = [];
  if (!entity.pipelines.some((p) => p.stages.some((s) => s.id === row.stage_id))) {
    problems.push({
      key: `${at}.stage`,
      reason: USED_BY_AUTOMATION,
      message: `${named} runs on stage ${row.stage} of ${row.pipeline}, which the definition leaves out`,
    });
  }
  const action = withoutStageId(row.config as unknown as StoredAction);
  const actionProblems: ValidationDetail[] = [];
  checkAction(entity, action, [], actionProblems);
  for (const problem of actionProblems) {
    // The modules are no part of a definition: a module removed since fails the run (decisions §7).
    if (problem.reason === 'module_not_enabled') continue;
    problems.push({
      key: `${at}.${problem.key}`,
      reason: USED_BY_AUTOMATION,
      message: `${named}: ${problem.message}`,
    });
  }
  return problems;
}

export interface AutomationsServiceDeps {
  db: Db;
  repo: AutomationsRepo;
  entities: EntitiesService;
  outbound: OutboundService;
  crm: CrmService;
  records: RecordsService;
  recordsRepo: RecordsRepo;
  reads: RecordsReadRepo;
  notes: NotesService;
  /** The distribution entry point, for `distribute` actions. */
  distribution?: Pick<DistributionService, 'distribute'>;
  jobs?: JobEnqueuer;
}

/** What a `crm.run-automation` job carries (automations.jobs.ts states it as the job's schema). */
export interface AutomationRunPayload {
  accountId: string;
  recordId: string;
  automationId: string;
  stage: string;
  stageId?: string;
  pipeline?: string;
  enteredAt?: string;
  chain: number;
  origin?: string;
}

/** CRM automations (decisions §7): settings, the jobs a move enqueues, and their runs. */
export function createAutomationsService(deps: AutomationsServiceDeps) {
  const { db, repo, entities, outbound, crm, recordsRepo, reads, jobs } = deps;

  async function load(accountId: string, id: string, tx: Executor = db) {
    const row = await repo.find(accountId, id, tx);
    if (!row) throw notFound();
    return row;
  }

  /**
   * Checks settings and answers what is stored; throws 422 naming every problem. `stored` is the
   * stage an update leaves as it is (its id and name): when the entity's definition has removed
   * it since, a disabled automation keeps it (it can still be renamed or changed, and runs
   * nothing), and an enabled one is refused naming the stage by its name, not its id.
   */
  async function check(
    accountId: string,
    settings: AutomationSettings,
    modules: string[],
    stored?: { stageId: string; stage: string; pipeline: string },
    storedAction?: StoredAction,
  ) {
    const problems: ValidationDetail[] = [];
    const entity = await entities.find(accountId, settings.entity);
    if (!entity || entity.archived) {
      throw new AppError('validation_failed', {
        details: [{ key: 'entity', reason: 'unknown_entity', message: `no entity ${settings.entity}` }],
      });
    }
    const placement = resolveStage(entity, { stage: settings.stage, pipeline: settings.pipeline });
    let stageId = 'reason' in placement ? null : placement.stage.id;
    if ('reason' in placement) {
      if (stored && !settings.enabled) stageId = stored.stageId;
      else if (stored) {
        problems.push({
          ...placement,
          message: `the stage ${stored.stage} of ${stored.pipeline} was removed from ${entity.key}: name another stage to enable this automation`,
        });
      } else problems.push(placement);
    }
    const actionProblems: ValidationDetail[] = [];
    let action = checkAction(entity, settings.action, modules, actionProblems);
    const target = (problem: ValidationDetail) =>
      problem.key === 'action.stage' || problem.key === 'action.pipeline';
    if (
      settings.enabled === false &&
      storedAction &&
      actionProblems.length > 0 &&
      isDeepStrictEqual(settings.action, withoutStageId(storedAction))
    ) {
      // The action as saved, unchanged, on an automation that stays disabled: what changed since
      // around it (a field its templates name removed from the entity, a module switched off)
      // does not stop renaming it or changing its stage; enabling it checks the action again.
      action = storedAction;
    } else if (
      settings.enabled === false &&
      storedAction &&
      actionProblems.some(target) &&
      keepsTarget(settings.action, storedAction)
    ) {
      // A move's target removed from the entity since: kept while the automation stays disabled,
      // as its own stage is (enabling it checks the target again).
      problems.push(...actionProblems.filter((problem) => !target(problem)));
      Object.assign(action, {
        pipeline: storedAction.pipeline,
        stage: storedAction.stage,
        stage_id: storedAction.stage_id,
      });
    } else problems.push(...actionProblems);
    if (
      action.type === 'distribute' &&
      settings.enabled !== false &&
      modules.includes('distribution') &&
      !(await repo.hasDistribution(accountId, entity.id))
    ) {
      // Decisions §7: found now, not by every run failing no_distribution. A distribution switched
      // off later is a pause, not a configuration mistake: its runs fail no_distribution.
      problems.push({
        key: 'action.type',
        reason: 'no_distribution',
        message: `${entity.key} has no distribution: set one up first (PUT /api/v1/settings/distributions/${entity.key}), or save this automation disabled`,
      });
    }
    if (problems.length > 0 || stageId === null) {
      // A missing module alone is named by its code (decisions §7); with other problems, all of
      // them are a validation failure.
      if (problems.every((problem) => problem.reason === 'module_not_enabled'))
        throw moduleNotEnabledInSetting(problems);
      throw new AppError('validation_failed', { details: problems });
    }
    return { stageId, action };
  }

  /**
   * Writes an automation (new when `previous` is null) and keeps its webhook destination in step
   * with its action; answers it, with the signing secret when a destination was made.
   */
  async function save(
    accountId: string,
    id: string,
    settings: AutomationSettings,
    checked: { stageId: string; action: StoredAction },
    previous: AutomationRow | null,
    rotateSecret = false,
  ) {
    const { stageId, action } = checked;
    return db.transaction().execute(async (tx) => {
      let destinationId = previous?.destination_id ?? null;
      let secret: string | undefined;
      if (action.type === 'webhook' && destinationId) {
        // A change enables the destination again, should the engine have disabled it (a 410, or
        // failing for LEADS_WEBHOOK_DISABLE_AFTER_S): "re-enabled by PATCH" (decisions §12).
        const updated = await outbound.updateDestination(
          accountId,
          AUTOMATION_WEBHOOK,
          destinationId,
          { url: action.url!, enabled: true },
          rotateSecret,
          tx,
        );
        secret = updated?.secret ?? undefined;
      } else if (action.type === 'webhook') {
        const destination = await outbound.createDestination(
          accountId,
          AUTOMATION_WEBHOOK,
          { url: action.url!, events: [], description: settings.name },
          tx,
        );
        secret = destination.secret;
        destinationId = destination.row.id;
      } else if (destinationId) {
        await outbound.deleteDestination(accountId, AUTOMATION_WEBHOOK, destinationId, tx);
        destinationId = null;
      }
      const input: AutomationInput = {
        stageId,
        name: settings.name,
        action: action.type,
        config: action as unknown as Record<string, unknown>,
        enabled: settings.enabled ?? true,
        destinationId,
      };
      if (previous) await repo.update(accountId, id, input, tx);
      else await repo.insert(accountId, id, input, tx);
      return { ...present(await load(accountId, id, tx)), ...(secret ? { secret } : {}) };
    });
  }

  /** Writes one history result of a run, with the automation as actor. */
  async function result(
    tx: Executor,
    accountId: string,
    recordId: string,
    automation: { id: string; name: string; action: string },
    outcome:
      | { ok: true; data?: Record<string, unknown> }
      | { ok: false; reason: string; data?: Record<string, unknown> },
  ) {
    await recordsRepo.insertEvents(
      accountId,
      [
        {
          recordId,
          type: outcome.ok ? 'automation_ran' : 'automation_failed',
          message: outcome.ok
            ? `${automation.name}: ${automation.action} done`
            : `${automation.name}: ${automation.action} failed (${outcome.reason})`,
          actor: `automation:${automation.name}`,
          data: {
            automation_id: automation.id,
            automation: automation.name,
            action: automation.action,
            ...(outcome.ok ? {} : { reason: outcome.reason }),
            ...outcome.data,
          },
        },
      ],
      tx,
    );
  }

  /** The move's transaction: one job per enabled automation of the target stage. */
  async function afterMove(tx: Executor, ctx: MoveContext, move: StageMove) {
    const ids = await repo.enabledForStage(ctx.accountId, move.stageId, tx);
    if (ids.length === 0) return;
    if (!jobs) throw new Error('automations need the job queue');
    // The chain these runs belong to: a request's move starts one, an automation's move carries its own.
    const origin = ctx.origin ?? randomUUID();
    for (const automationId of ids) {
      await jobs.enqueue(tx, runAutomationJob, {
        accountId: ctx.accountId,
        recordId: move.id,
        automationId,
        stage: move.crm.stage,
        stageId: move.stageId,
        pipeline: move.crm.pipeline,
        enteredAt: move.crm.entered_at,
        chain: ctx.chain,
        origin,
      });
    }
  }

  /** The final outcome of an automation's webhook or email, in the transaction of its last attempt. */
  async function onOutcome(tx: Executor, outcome: MessageOutcome) {
    if (outcome.status === 'pending' || !outcome.ref) return;
    const ref = JSON.parse(outcome.ref) as {
      record: string;
      automation: string;
      name: string;
      action: string;
    };
    const automation = { id: ref.automation, name: ref.name, action: ref.action };
    const data = { message_id: outcome.messageId, attempts: outcome.attempts };
    const exists = await tx
      .selectFrom('records')
      .select('id')
      .where('account_id', '=', outcome.accountId)
      .where('id', '=', ref.record)
      .executeTakeFirst();
    if (!exists) return;
    await result(
      tx,
      outcome.accountId,
      ref.record,
      automation,
      outcome.status === 'delivered'
        ? { ok: true, data }
        : { ok: false, reason: 'delivery_failed', data: { ...data, error: outcome.error } },
    );
  }
  outbound.onOutcome(OUTCOME_HOOK, onOutcome);

  /**
   * An entity change (its PUT) that would leave an enabled automation of the entity naming a stage,
   * pipeline or field the new definition lacks, or a field that no longer fits (`to` naming a field
   * without the email format or role), is refused (decisions §7: found at configuration time).
   * Only what the change breaks counts: a problem the automation had before is not the change's.
   */
  async function definitionProblems(tx: Executor, accountId: string, before: EntityDef, after: EntityDef) {
    const rows = await repo.enabledOfEntity(accountId, after.id, tx);
    return rows.flatMap((row) => {
      const known = new Set(dependencyProblems(before, row).map((p) => `${p.key}\n${p.message}`));
      return dependencyProblems(after, row).filter((p) => !known.has(`${p.key}\n${p.message}`));
    });
  }
  entities.addDefinitionGuard(definitionProblems);

  /**
   * Runs one automation for one move (the job's handler). Every effect is written together with
   * the run's mark (its job id) in one transaction, so that a retry of a job whose effect
   * committed (the worker died before the queue learnt it) does nothing a second time.
   *
   * Only `move_stage` asks whether the record is still in the stay that queued the run (it changes
   * where the record is now, and would undo a later move); a note, email, webhook or distribution
   * reports or acts on the entry into the stage, which happened, and runs whatever the record did
   * since (docs/decisions.md, CRM module).
   */
  async function run(
    /** The job's id, the same for each retry of one run. */
    jobId: string,
    payload: AutomationRunPayload,
  ) {
    const { accountId, recordId } = payload;
    const alreadyRan = { skipped: 'already_ran' };
    if (await repo.runDone(accountId, jobId)) return alreadyRan;
    const row = await repo.find(accountId, payload.automationId);
    if (!row?.enabled) return { skipped: 'automation_gone_or_disabled' };
    const record = await reads.findFull(accountId, recordId);
    if (!record) return { skipped: 'record_gone' };
    const automation = { id: row.id, name: row.name, action: row.action };
    const action = row.config as unknown as StoredAction;
    const fields = record.fields as Record<string, unknown>;
    const values = (token = ''): Record<string, string> => ({
      ...Object.fromEntries(Object.entries(fields).map(([key, value]) => [key, textOf(value)])),
      'record.id': record.id,
      stage: payload.stage,
      record_token: token,
    });
    const ref = JSON.stringify({ record: recordId, automation: row.id, name: row.name, action: row.action });
    const mark = { id: jobId, automationId: row.id, recordId };
    /** The effect and the run's mark in one transaction; false (nothing written) when the mark was there. */
    const once = (effect: (tx: Executor) => Promise<unknown>) =>
      db.transaction().execute(async (tx) => {
        if (!(await repo.claimRun(accountId, mark, tx))) return false;
        await effect(tx);
        return true;
      });
    const failed = async (reason: string, data?: Record<string, unknown>) =>
      (await once((tx) => result(tx, accountId, recordId, automation, { ok: false, reason, data })))
        ? { failed: reason }
        : alreadyRan;

    switch (row.action as ActionType) {
      case 'note': {
        const body = render(action.body ?? '', values());
        // A blank note adds nothing (as on POST /api/v1/notes), and one over that endpoint's bound
        // is not stored, nor cut: the run fails naming why.
        if (!isNoteText(body)) return failed('blank_note');
        if (longerThan(body, MAX_NOTE_LENGTH)) {
          return failed('note_too_long', { length: codePointLength(body), max_length: MAX_NOTE_LENGTH });
        }
        // The note's own idempotency key keeps a retry from adding it twice; its result goes with the mark.
        await deps.notes.add(
          {
            accountId,
            keyName: row.name,
            requestId: `automation:${row.id}`,
            actor: `automation:${row.name}`,
          },
          { record: recordId, body, idempotencyKey: `automation:${jobId}` },
        );
        const ran = await once((tx) => result(tx, accountId, recordId, automation, { ok: true }));
        return ran ? { ran: 'note' } : alreadyRan;
      }
      case 'move_stage': {
        // The chain's moves are counted in the database (decisions §7: 10 moves caused by one
        // request), whatever its depth and however many of its runs go at once. A job queued
        // before chains were counted carries its depth alone: it starts a chain of its own there.
        const origin = payload.origin ?? jobId;
        const first = payload.origin ? 1 : payload.chain + 1;
        let answer: Record<string, string> = { ran: 'move_stage' };
        const ran = await once(async (tx) => {
          const move = await crm.moveWithin(
            tx,
            {
              accountId,
              actor: `automation:${row.name}`,
              requestId: `automation:${row.id}`,
              chain: payload.chain + 1,
              origin,
              // Only from the stay that queued the run: a record moved on since (by a person, or
              // out and back in) is not moved again by a run of an older stay.
              stay: { stageId: payload.stageId, enteredAt: payload.enteredAt },
              admit: async (moveTx) =>
                (await repo.countChainMove(accountId, origin, first, MAX_CHAINED_MOVES, moveTx))
                  ? null
                  : 'loop_limit',
            },
            recordId,
            {
              stage: action.stage_id ?? action.stage ?? '',
              pipeline: action.stage_id ? null : action.pipeline,
              // A stage id names one stage of one pipeline: on an entity with several pipelines
              // that pipeline is found from it (without, the move asked for a pipeline and failed).
              pipelineFromStage: true,
            },
          );
          if (move.refused) {
            answer = { failed: move.refused };
            await result(tx, accountId, recordId, automation, {
              ok: false,
              reason: move.refused,
              data:
                move.refused === 'left_stage'
                  ? {
                      stage: payload.stage,
                      ...(payload.enteredAt ? { entered_at: payload.enteredAt } : {}),
                      current_stage: move.crm.stage,
                    }
                  : undefined,
            });
            return;
          }
          // A move to the stage the record is in moves nothing and runs no automation.
          await result(tx, accountId, recordId, automation, {
            ok: true,
            data: { stage: move.crm.stage, previous: move.previous, moved: move.moved },
          });
        });
        return ran ? answer : alreadyRan;
      }
      case 'webhook': {
        if (!row.destination_id) throw new Error('webhook automation without destination');
        const ran = await once((tx) =>
          outbound.enqueueWebhook(tx, accountId, {
            destinationId: row.destination_id!,
            type: 'record.stage_changed',
            data: {
              ...recordEventData(record.entity_key, record),
              crm: {
                // The move's pipeline and stage (a job queued before the pipeline was carried: the
                // automation's, the stage's pipeline), never the record's now.
                pipeline: payload.pipeline ?? row.pipeline,
                stage: payload.stage,
                ...(payload.enteredAt ? { entered_at: payload.enteredAt } : {}),
              },
              automation: { id: row.id, name: row.name },
            },
            notify: OUTCOME_HOOK,
            ref,
            originId: row.id,
          }),
        );
        return ran ? { enqueued: 'webhook' } : alreadyRan;
      }
      case 'email': {
        const toTemplate = action.to ?? '';
        const to =
          variablesOf(toTemplate).length > 0 ? render(toTemplate, values()).trim() : toTemplate.trim();
        if (!EMAIL.test(to)) return failed('no_recipient');
        const usesToken = [action.subject, action.body].some(
          (t) => t && variablesOf(t).includes('record_token'),
        );
        const token = usesToken
          ? (
              await deps.records.issueToken(accountId, recordId, {
                fields: action.record_token_fields ?? [],
                expires_in_days: action.record_token_days,
              })
            ).token
          : '';
        const body = action.body ?? '';
        const html = looksLikeHtml(body) ? render(body, values(token), true) : undefined;
        // The text part keeps the HTML's links (`go [https://…]`) and paragraphs (blank lines).
        const text = html !== undefined ? await textOfHtml(html) : render(body, values(token));
        const subject = render(action.subject ?? '', values(token)).replace(/[\r\n]+/g, ' ');
        if (!isNoteText(subject) && !isNoteText(text)) return failed('empty_email');
        // nodemailer folds a long subject at its blanks only: one over a header line's bound
        // (RFC 5322, 998) less `Subject: ` could be a line no server takes.
        if (longerThan(subject, MAX_SUBJECT_LENGTH)) {
          return failed('subject_too_long', {
            length: codePointLength(subject),
            max_length: MAX_SUBJECT_LENGTH,
          });
        }
        const ran = await once((tx) =>
          outbound.enqueueEmail(
            tx,
            accountId,
            { to: [to], subject, text, ...(html !== undefined ? { html } : {}) },
            { type: 'automation.email', notify: OUTCOME_HOOK, ref, originId: row.id },
          ),
        );
        return ran ? { enqueued: 'email' } : alreadyRan;
      }
      case 'distribute': {
        if (!deps.distribution || !(await repo.accountModules(accountId)).includes('distribution')) {
          return failed('module_not_enabled');
        }
        const distribution = deps.distribution;
        const outcome: { runId?: string } = {};
        // The run, its result and the run's mark in one transaction: a retried job never
        // distributes twice.
        const ran = await once(async (tx) => {
          const run = await distribution
            .distribute(
              accountId,
              recordId,
              { triggeredBy: 'automation', actor: `automation:${row.name}` },
              tx,
            )
            .catch((error: unknown) => {
              if (error instanceof AppError && error.code === 'no_distribution') return null;
              throw error;
            });
          if (!run) {
            await result(tx, accountId, recordId, automation, { ok: false, reason: 'no_distribution' });
            return;
          }
          await result(tx, accountId, recordId, automation, {
            ok: true,
            data: { run_id: run.runId, status: run.status, reason: run.reason },
          });
          outcome.runId = run.runId;
        });
        if (!ran) return alreadyRan;
        return outcome.runId ? { ran: 'distribute', run_id: outcome.runId } : { failed: 'no_distribution' };
      }
      default:
        return failed('module_not_enabled');
    }
  }

  return {
    afterMove,
    run,

    /** `permissions`: the API key's, or null for a signed-in person (the route checked the role). */
    async create(
      accountId: string,
      settings: AutomationSettings,
      modules: string[],
      permissions: readonly string[] | null,
    ) {
      refuseActionBeyondKey(settings.action.type, permissions);
      const { stageId, action } = await check(accountId, settings, modules);
      if ((await repo.count(accountId)) >= MAX_AUTOMATIONS) {
        throw new AppError('validation_failed', {
          details: [
            {
              key: 'name',
              reason: 'too_many',
              message: `at most ${MAX_AUTOMATIONS} automations per account`,
            },
          ],
        });
      }
      return save(accountId, randomUUID(), settings, { stageId, action }, null);
    },

    async get(accountId: string, id: string) {
      return present(await load(accountId, id));
    },

    async list(accountId: string, query: { limit?: number; cursor?: string }) {
      const limit = query.limit ?? 100;
      const rows = await repo.list(accountId, limit + 1, decodeCursor(query.cursor));
      const { items, nextCursor } = pageOf(rows, limit);
      return { automations: items.map(present), next_cursor: nextCursor };
    },

    async update(
      accountId: string,
      id: string,
      changes: Partial<AutomationSettings> & { rotate_secret?: boolean },
      modules: string[],
      permissions: readonly string[] | null,
    ) {
      const row = await load(accountId, id);
      const storedAction = withoutStageId(row.config as unknown as StoredAction);
      // Any change of an automation that sends records (its stage, a re-enabled destination, a
      // new secret) is a change to what it sends, as any PATCH of an account webhook is.
      refuseActionBeyondKey((changes.action ?? storedAction).type, permissions);
      const movedStage =
        changes.stage !== undefined || changes.pipeline !== undefined || changes.entity !== undefined;
      const settings: AutomationSettings = {
        name: changes.name ?? row.name,
        entity: changes.entity ?? row.entity,
        stage: changes.stage ?? (movedStage ? row.stage : row.stage_id),
        // Another entity has other pipelines: its stage is named afresh (with its pipeline, if several).
        pipeline: changes.pipeline ?? (changes.entity !== undefined ? undefined : row.pipeline),
        action: changes.action ?? storedAction,
        enabled: changes.enabled ?? row.enabled,
      };
      const checked = await check(
        accountId,
        settings,
        modules,
        movedStage ? undefined : { stageId: row.stage_id, stage: row.stage, pipeline: row.pipeline },
        settings.entity === row.entity ? (row.config as unknown as StoredAction) : undefined,
      );
      const rotate = changes.rotate_secret === true;
      // A new secret is for a webhook that keeps its destination; a new webhook gets one anyway.
      if (rotate && (checked.action.type !== 'webhook' || !row.destination_id)) {
        throw new AppError('validation_failed', {
          details: [
            {
              key: 'rotate_secret',
              reason: 'not_allowed',
              message: 'only a webhook action that stays a webhook has a secret to rotate',
            },
          ],
        });
      }
      return save(accountId, id, settings, checked, row, rotate);
    },

    /**
     * The attempts of the messages the automation sent (webhook or email), newest first; a
     * note, stage move or distribution sends none (its result is in the record's history).
     */
    async attempts(accountId: string, id: string, query: { limit?: number; cursor?: string }) {
      await load(accountId, id);
      return outbound.attemptsPage(accountId, { originId: id }, query.limit ?? 100, query.cursor);
    },

    async remove(accountId: string, id: string) {
      const row = await load(accountId, id);
      await db.transaction().execute(async (tx) => {
        await repo.delete(accountId, id, tx);
        if (row.destination_id)
          await outbound.deleteDestination(accountId, AUTOMATION_WEBHOOK, row.destination_id, tx);
      });
    },
  };
}

export type AutomationsService = ReturnType<typeof createAutomationsService>;
