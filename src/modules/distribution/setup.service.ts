import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Db, Executor, ParticipationSchedule, RuleFilter } from '../../db/types.ts';
import { AppError, type ValidationDetail } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { type CursorPosition, decodeCursor, pageOf } from '../../lib/cursor.ts';
import { zoneName } from '../../lib/time-zones.ts';
import type { AddressPolicy } from '../../outbound/address-policy.ts';
import type { OutboundService } from '../../outbound/outbound.service.ts';
import type { EntityDef, FieldDef } from '../entities/entities.model.ts';
import type { EntitiesService } from '../entities/entities.service.ts';
import { checkUrl } from '../webhooks/webhooks.service.ts';
import { EMAIL_ADDRESS } from './checks.ts';
import { isCurrency } from './currencies.ts';
import { rangeCanHold, sameValue } from './distribution.selection.ts';
import type { PartnersRepo } from './partners.repo.ts';
import type {
  DistributionRow,
  ParticipationColumns,
  ParticipationRow,
  RuleColumns,
  RuleRow,
  SetupRepo,
} from './setup.repo.ts';
import {
  MAX_PARTICIPATIONS,
  MAX_RETURN_REASONS,
  type ParticipationChanges,
  type ParticipationInput,
  type RuleSettings,
  type ScheduleSettings,
} from './setup.schemas.ts';

/** `limit` and `cursor` of a list (decisions §6); a page holds 100 unless told. */
type PageParams = { limit?: number; cursor?: string };
const DEFAULT_PAGE = 100;

/** One page of a list: the repo reads one row past `limit`, which becomes the next cursor. */
async function pageFrom<T extends { created_at: Date; id: string }>(
  query: PageParams,
  read: (page: { limit: number; after: CursorPosition | null }) => Promise<T[]>,
) {
  const limit = query.limit ?? DEFAULT_PAGE;
  return pageOf(await read({ limit: limit + 1, after: decodeCursor(query.cursor) }), limit);
}

/** The outbound engine's purpose of partner webhooks (decisions §12). */
export const PARTICIPATION_WEBHOOK = 'participation';

/** The reason of an entity PUT's detail for a field a distribution rule's filter names. */
export const USED_BY_RULE = 'used_by_rule';

/** The reason of a rule filter's value that is none of its select field's options. */
const UNKNOWN_OPTION = 'unknown_option';

/** Members each filter op takes besides `field` and `op`; at least one of them is needed. */
const FILTER_MEMBERS: Record<RuleFilter['op'], readonly string[]> = {
  equals: ['value'],
  in: ['values'],
  range: ['min', 'max'],
  postal_prefix: ['prefix'],
};
const ALL_FILTER_MEMBERS = ['value', 'values', 'min', 'max', 'prefix'] as const;

/** A distribution with its participations and rules, as stored (what the engine reads). */
export interface DistributionSetupRows {
  distribution: DistributionRow;
  participations: ParticipationRow[];
  rules: RuleRow[];
}

function invalid(details: ValidationDetail[]): AppError {
  return new AppError('validation_failed', { details });
}

function entityNotFound(): AppError {
  return new AppError('not_found', { message: 'Entity not found' });
}

function participationNotFound(): AppError {
  return new AppError('not_found', { message: 'Participation not found' });
}

export function presentParticipation(row: ParticipationRow) {
  return {
    id: row.id,
    entity: row.entity,
    partner_id: row.partner_id,
    partner_name: row.partner_name,
    partner_retired: row.partner_retired,
    channel: row.channel,
    address: row.address,
    price_cents: row.price_cents,
    currency: row.currency,
    caps: { day: row.cap_per_day, month: row.cap_per_month },
    schedule: row.schedule,
    weight: row.weight,
    paused: row.paused,
    paused_reason: row.paused_reason,
    previous_secret_until: row.previous_secret_until ? iso(row.previous_secret_until) : null,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

export function presentRule(row: RuleRow) {
  return {
    id: row.id,
    name: row.name,
    position: row.position,
    filter: row.filter,
    strategy: row.strategy,
    max_partners: row.max_partners,
    participation_ids: row.participation_ids,
  };
}

function presentSetup({ distribution, participations, rules }: DistributionSetupRows) {
  return {
    id: distribution.id,
    entity: distribution.entity,
    return_deadline_days: distribution.return_deadline_days,
    redistribute_on_return: distribution.redistribute_on_return,
    enabled: distribution.enabled,
    participations: participations.map(presentParticipation),
    rules: rules.map(presentRule),
    created_at: iso(distribution.created_at),
    updated_at: iso(distribution.updated_at),
  };
}

function checkSchedule(schedule: ScheduleSettings, problems: ValidationDetail[]): ParticipationSchedule {
  // Stored as `zoneName` gives it: a bare offset refused, an alias kept as written.
  const zone = zoneName(schedule.time_zone);
  if (!zone) {
    problems.push({
      key: 'schedule.time_zone',
      reason: 'invalid_time_zone',
      message: `${schedule.time_zone} is no IANA time zone`,
    });
  }
  // `to` before `from` is a night window (it belongs to the weekday it starts on); an empty one
  // is refused, and the whole day is 00:00–24:00.
  if (schedule.to === schedule.from) {
    problems.push({ key: 'schedule.to', reason: 'invalid_range', message: 'to must differ from from' });
  }
  return {
    time_zone: zone ?? schedule.time_zone,
    weekdays: [...new Set(schedule.weekdays)].sort((a, b) => a - b),
    from: schedule.from,
    to: schedule.to,
  };
}

/** Distribution setups, participations, rules and return reasons (settings API, decisions §8). */
export function createSetupService(deps: {
  db: Db;
  repo: SetupRepo;
  partners: PartnersRepo;
  entities: EntitiesService;
  outbound: OutboundService;
  /** The outbound engine's address rule: an IP address in a webhook URL is checked on entry. */
  addressPolicy: AddressPolicy;
}) {
  const { db, repo, partners, entities, outbound, addressPolicy } = deps;

  /** A participation's destination that nothing uses any more goes, with its sent messages. */
  async function dropIdleDestination(accountId: string, destinationId: string, tx: Executor) {
    if (await repo.dropIdleDestination(accountId, destinationId, tx)) {
      await outbound.deleteMessagesOf(accountId, destinationId, tx);
    }
  }

  /**
   * An entity change (its PUT) that would leave a rule's filter naming a field the definition no
   * longer has, or an `equals`/`in` value a select field no longer offers, is refused: `putRules`
   * refuses such a filter (unknown_field, unknown_option), and a stored one would never match
   * again without a word. Only what the change breaks counts (a field or option gone before is
   * not this change's). A changed type is not checked, as `putRules` takes any op on any field.
   */
  async function definitionProblems(tx: Executor, accountId: string, before: EntityDef, after: EntityDef) {
    const distribution = await repo.findDistribution(accountId, after.id, tx);
    if (!distribution) return [];
    const had = new Map(before.fields.map((field) => [field.key, field]));
    const has = new Map(after.fields.map((field) => [field.key, field]));
    const rules = await repo.listRules(accountId, [distribution.id], tx);
    return rules.flatMap((rule) =>
      rule.filter.flatMap((condition, at): ValidationDetail[] => {
        if (!had.has(condition.field)) return [];
        const key = `distribution_rules.${rule.id}.filter.${at}`;
        const field = has.get(condition.field);
        if (!field) {
          return [
            {
              key: `${key}.field`,
              reason: USED_BY_RULE,
              message: `distribution rule "${rule.name}" filters on field ${condition.field}, which the definition leaves out`,
            },
          ];
        }
        // Only a select field limits the values a record can hold; another type keeps any.
        if (!isSelectField(field)) return [];
        const was = had.get(condition.field);
        return optionValuesOf(condition, key)
          .filter(([, value]) => offers(was, value) && !offers(field, value))
          .map(([valueKey, value]) => ({
            key: valueKey,
            reason: USED_BY_RULE,
            message: `distribution rule "${rule.name}" filters on ${condition.field} ${String(value)}, an option the definition leaves out`,
          }));
      }),
    );
  }
  entities.addDefinitionGuard(definitionProblems);

  async function entityOf(accountId: string, key: string): Promise<EntityDef> {
    const entity = await entities.find(accountId, key);
    if (!entity || entity.key !== key) throw entityNotFound();
    return entity;
  }

  async function setupsOf(distributions: DistributionRow[], accountId: string, tx: Executor = db) {
    const ids = distributions.map((d) => d.id);
    const [participations, rules] = await Promise.all([
      repo.listParticipations(accountId, ids, tx),
      repo.listRules(accountId, ids, tx),
    ]);
    return distributions.map((distribution) => ({
      distribution,
      participations: participations.filter((p) => p.distribution_id === distribution.id),
      rules: rules.filter((r) => r.distribution_id === distribution.id),
    }));
  }

  /** A distribution's setup by its entity's id, or undefined when the entity has none (for the engine). */
  async function loadSetup(
    accountId: string,
    entityId: string,
    tx: Executor = db,
  ): Promise<DistributionSetupRows | undefined> {
    const distribution = await repo.findDistribution(accountId, entityId, tx);
    if (!distribution) return undefined;
    const [setup] = await setupsOf([distribution], accountId, tx);
    return setup;
  }

  async function setupOfKey(accountId: string, key: string, tx: Executor = db) {
    const entity = await entityOf(accountId, key);
    const setup = await loadSetup(accountId, entity.id, tx);
    if (!setup) throw new AppError('not_found', { message: `No distribution is set up for ${key}` });
    return setup;
  }

  /** The address fits the channel; a webhook URL's IP address passes the outbound rule. */
  function checkAddress(channel: string, address: string, problems: ValidationDetail[]) {
    if (channel === 'email') {
      if (!EMAIL_ADDRESS.test(address)) {
        problems.push({
          key: 'address',
          reason: 'invalid_format',
          message: 'an email channel needs an email address',
        });
      }
      return;
    }
    const urlProblems: ValidationDetail[] = [];
    checkUrl(address, urlProblems);
    problems.push(...urlProblems.map((problem) => ({ ...problem, key: 'address' })));
    if (urlProblems.length > 0) return;
    const url = new URL(address);
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const ip = host === 'localhost' || host.endsWith('.localhost') ? '127.0.0.1' : host;
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    // Names are resolved at each send, where the same rule applies to what they point at.
    if (net.isIP(ip) && !addressPolicy.allows(ip, port)) {
      problems.push({
        key: 'address',
        reason: 'blocked_address',
        message: 'the URL points at an address outbound requests may not reach',
      });
    }
  }

  /**
   * An ISO 4217 currency in use (`currencies.ts`), and one currency per distribution (decisions
   * §8: `price_total` is in the deliveries' currency): a participation's currency must be that
   * of every other participation of its distribution.
   */
  async function checkCurrency(
    accountId: string,
    distributionId: string,
    participationId: string | null,
    currency: string,
    problems: ValidationDetail[],
    tx: Executor,
  ) {
    if (!isCurrency(currency)) {
      // Checked before the distribution's others: an unknown code would set one currency for all.
      problems.push({
        key: 'currency',
        reason: 'invalid_currency',
        message: `${currency} is no ISO 4217 code of a currency in use`,
      });
      return;
    }
    const others = await repo.currenciesOf(accountId, distributionId, participationId, tx);
    if (others.some((other) => other !== currency)) {
      problems.push({
        key: 'currency',
        reason: 'currency_mismatch',
        message: `the distribution's other participations are priced in ${others.join(', ')}`,
      });
    }
  }

  async function checkPartner(
    accountId: string,
    partnerId: string,
    problems: ValidationDetail[],
    tx: Executor,
  ) {
    const partner = await partners.find(accountId, partnerId, tx);
    if (!partner || partner.retired) {
      problems.push({
        key: 'partner_id',
        reason: 'unknown_partner',
        message: partner ? 'the partner is retired' : 'no partner of the account has that id',
      });
    }
  }

  /** Destination changes after a participation's channel or address changed; answers a new secret. */
  async function keepDestination(
    tx: Executor,
    accountId: string,
    before: { channel: string; address: string; destination_id: string | null } | null,
    after: { channel: string; address: string; description: string },
    rotate: boolean,
  ): Promise<{ destinationId: string | null; secret?: string }> {
    const previous = before?.destination_id ?? null;
    if (after.channel !== 'webhook') {
      return { destinationId: null };
    }
    if (!previous) {
      const created = await outbound.createDestination(
        accountId,
        PARTICIPATION_WEBHOOK,
        { url: after.address, events: [], description: after.description },
        tx,
      );
      return { destinationId: created.row.id, secret: created.secret };
    }
    const urlChanged = before?.address !== after.address;
    if (!urlChanged && !rotate) return { destinationId: previous };
    const updated = await outbound.updateDestination(
      accountId,
      PARTICIPATION_WEBHOOK,
      previous,
      urlChanged ? { url: after.address } : {},
      rotate,
      tx,
    );
    return { destinationId: previous, ...(updated?.secret ? { secret: updated.secret } : {}) };
  }

  return {
    loadSetup,

    async list(accountId: string, query: PageParams) {
      const page = await pageFrom(query, (at) => repo.listDistributions(accountId, at));
      const setups = await setupsOf(page.items, accountId);
      return { distributions: setups.map(presentSetup), next_cursor: page.nextCursor };
    },

    async get(accountId: string, key: string) {
      return presentSetup(await setupOfKey(accountId, key));
    },

    async put(
      accountId: string,
      key: string,
      input: { return_deadline_days?: number; redistribute_on_return?: boolean; enabled?: boolean },
    ) {
      const entity = await entityOf(accountId, key);
      const changes = Object.fromEntries(Object.entries(input).filter(([, value]) => value !== undefined));
      await repo.saveDistribution(accountId, { id: randomUUID(), entityId: entity.id, name: key, changes });
      return presentSetup((await loadSetup(accountId, entity.id))!);
    },

    async addParticipation(accountId: string, key: string, input: ParticipationInput) {
      const entity = await entityOf(accountId, key);
      const problems: ValidationDetail[] = [];
      checkAddress(input.channel, input.address, problems);
      const schedule = input.schedule ? checkSchedule(input.schedule, problems) : null;
      return db.transaction().execute(async (tx) => {
        const distribution = await repo.findDistribution(accountId, entity.id, tx);
        if (!distribution)
          throw new AppError('not_found', { message: `No distribution is set up for ${key}` });
        // Serialises additions to one distribution, so that the count below holds.
        await repo.lockDistribution(accountId, distribution.id, tx);
        await checkPartner(accountId, input.partner_id, problems, tx);
        await checkCurrency(accountId, distribution.id, null, input.currency ?? 'EUR', problems, tx);
        if ((await repo.countParticipations(accountId, distribution.id, tx)) >= MAX_PARTICIPATIONS) {
          problems.push({
            key: 'partner_id',
            reason: 'too_many',
            message: `at most ${MAX_PARTICIPATIONS} participations per distribution`,
          });
        }
        if (problems.length > 0) throw invalid(problems);
        const id = randomUUID();
        const destination = await keepDestination(
          tx,
          accountId,
          null,
          { channel: input.channel, address: input.address, description: `participation ${id}` },
          false,
        );
        await repo.insertParticipation(
          accountId,
          {
            id,
            distribution_id: distribution.id,
            partner_id: input.partner_id,
            channel: input.channel,
            address: input.address,
            destination_id: destination.destinationId,
            price_cents: input.price_cents,
            currency: input.currency ?? 'EUR',
            cap_per_day: input.caps?.day ?? null,
            cap_per_month: input.caps?.month ?? null,
            schedule,
            weight: input.weight ?? 1,
            paused: input.paused ?? false,
          },
          tx,
        );
        const row = (await repo.findParticipation(accountId, id, tx))!;
        return {
          ...presentParticipation(row),
          ...(destination.secret ? { secret: destination.secret } : {}),
        };
      });
    },

    async updateParticipation(accountId: string, id: string, input: ParticipationChanges) {
      return db.transaction().execute(async (tx) => {
        const current = await repo.lockParticipation(accountId, id, tx);
        if (!current) throw participationNotFound();
        const problems: ValidationDetail[] = [];
        const channel = input.channel ?? current.channel;
        const address = input.address ?? current.address;
        if (input.channel !== undefined || input.address !== undefined)
          checkAddress(channel, address, problems);
        if (input.rotate_secret && channel !== 'webhook') {
          problems.push({
            key: 'rotate_secret',
            reason: 'not_allowed',
            message: 'an email participation has no signing secret',
          });
        }
        if (input.partner_id !== undefined && input.partner_id !== current.partner_id) {
          await checkPartner(accountId, input.partner_id, problems, tx);
        }
        if (input.currency !== undefined && input.currency !== current.currency) {
          // Serialised with additions and other changes of the distribution (they lock it too).
          await repo.lockDistribution(accountId, current.distribution_id, tx);
          await checkCurrency(accountId, current.distribution_id, id, input.currency, problems, tx);
        }
        const columns: ParticipationColumns = {};
        if (input.schedule !== undefined) {
          columns.schedule = input.schedule === null ? null : checkSchedule(input.schedule, problems);
        }
        if (problems.length > 0) throw invalid(problems);
        for (const member of ['partner_id', 'price_cents', 'currency', 'weight'] as const) {
          if (input[member] !== undefined) Object.assign(columns, { [member]: input[member] });
        }
        if (input.caps === null) Object.assign(columns, { cap_per_day: null, cap_per_month: null });
        else if (input.caps) {
          if (input.caps.day !== undefined) columns.cap_per_day = input.caps.day;
          if (input.caps.month !== undefined) columns.cap_per_month = input.caps.month;
        }
        if (input.paused !== undefined) {
          columns.paused = input.paused;
          // Paused by hand says nothing about why; taken up again, the service's reason is over.
          columns.paused_reason = null;
        }
        columns.channel = channel;
        columns.address = address;
        const destination = await keepDestination(
          tx,
          accountId,
          current,
          { channel, address, description: `participation ${id}` },
          input.rotate_secret === true,
        );
        columns.destination_id = destination.destinationId;
        // A receiver that answered 410 had its destination disabled with the pause; resuming
        // the participation enables it again, or its deliveries would fail without a request.
        if (input.paused === false && destination.destinationId) {
          await outbound.updateDestination(
            accountId,
            PARTICIPATION_WEBHOOK,
            destination.destinationId,
            { enabled: true },
            false,
            tx,
          );
        }
        await repo.updateParticipation(accountId, id, columns, tx);
        if (current.destination_id && current.destination_id !== destination.destinationId) {
          await dropIdleDestination(accountId, current.destination_id, tx);
        }
        const row = (await repo.findParticipation(accountId, id, tx))!;
        return {
          ...presentParticipation(row),
          ...(destination.secret ? { secret: destination.secret } : {}),
        };
      });
    },

    /**
     * Deletes a participation that no rule names (a rule naming it refuses, 409 `used_by_rule`, so
     * that no rule is left choosing from nothing); deliveries already made keep their partner
     * and price, and its webhook destination stays until their messages are sent.
     */
    async removeParticipation(accountId: string, id: string) {
      await db.transaction().execute(async (tx) => {
        const found = await repo.findParticipation(accountId, id, tx);
        if (!found) throw participationNotFound();
        // The distribution first, as `putRules` locks it: a rule written meanwhile is seen below.
        await repo.lockDistribution(accountId, found.distribution_id, tx);
        const current = await repo.lockParticipation(accountId, id, tx);
        if (!current) throw participationNotFound();
        const naming = (await repo.listRules(accountId, [current.distribution_id], tx)).filter((rule) =>
          rule.participation_ids.includes(current.id),
        );
        // A conflict with stored rules, not a wrong value in the request (which has none): 409,
        // as a calendar with appointments ahead is, naming the rules.
        if (naming.length > 0) {
          const message = `${naming.map((rule) => `distribution rule "${rule.name}"`).join(', ')} ${naming.length === 1 ? 'names' : 'name'} this participation: take it out of the rules first`;
          throw new AppError('conflict', {
            message,
            // The S2 conflict body carries what `extra` holds: the reason, the rules and the words.
            extra: { reason: USED_BY_RULE, rule_ids: naming.map((rule) => rule.id), message },
          });
        }
        await repo.deleteParticipation(accountId, id, tx);
        if (current.destination_id) await dropIdleDestination(accountId, current.destination_id, tx);
      });
    },

    async putRules(accountId: string, key: string, rules: RuleSettings[]) {
      const entity = await entityOf(accountId, key);
      return db.transaction().execute(async (tx) => {
        const distribution = await repo.findDistribution(accountId, entity.id, tx);
        if (!distribution)
          throw new AppError('not_found', { message: `No distribution is set up for ${key}` });
        await repo.lockDistribution(accountId, distribution.id, tx);
        // The fields as stored, held until the rules are written: an entity PUT meanwhile (or one
        // another node's cache has not seen yet) checks these rules once they are in.
        const fields = await entities.lockFields(accountId, entity.id, tx);
        if (!fields) throw entityNotFound();
        const fieldsByKey = new Map(fields.map((field) => [field.key, field]));
        const participationIds = new Set(
          (await repo.listParticipations(accountId, [distribution.id], tx)).map((p) => p.id),
        );
        const problems: ValidationDetail[] = [];
        const names = new Set<string>();
        const checked: RuleColumns[] = rules.map((rule, index) => {
          const name = rule.name.trim();
          if (name === '')
            problems.push({ key: `${index}.name`, reason: 'required', message: 'a name that is not blank' });
          else if (names.has(name.toLowerCase())) {
            problems.push({
              key: `${index}.name`,
              reason: 'duplicate',
              message: `a rule named ${name} comes earlier`,
            });
          }
          names.add(name.toLowerCase());
          const filter = (rule.filter ?? []).map((condition, at) =>
            checkFilter(condition as RuleFilter, `${index}.filter.${at}`, fieldsByKey, problems),
          );
          const named = new Set<string>();
          for (const participationId of rule.participation_ids) {
            const id = participationId.toLowerCase();
            if (!participationIds.has(id)) {
              problems.push({
                key: `${index}.participation_ids`,
                reason: 'unknown_participation',
                message: `${participationId} is no participation of this distribution`,
              });
            } else if (named.has(id)) {
              problems.push({
                key: `${index}.participation_ids`,
                reason: 'duplicate',
                message: `${participationId} is named more than once`,
              });
            }
            named.add(id);
          }
          return {
            name,
            filter,
            strategy: rule.strategy,
            max_partners: rule.max_partners ?? 1,
            participation_ids: [...named],
          };
        });
        if (problems.length > 0) throw invalid(problems);
        await repo.replaceRules(
          accountId,
          distribution.id,
          checked,
          checked.map(() => randomUUID()),
          tx,
        );
        return (await repo.listRules(accountId, [distribution.id], tx)).map(presentRule);
      });
    },

    // Return reasons.

    async listReturnReasons(accountId: string, query: PageParams) {
      const page = await pageFrom(query, (at) => repo.listReturnReasons(accountId, at));
      return {
        return_reasons: page.items.map(({ id, name }) => ({ id, name })),
        next_cursor: page.nextCursor,
      };
    },

    async addReturnReason(accountId: string, input: { name: string }) {
      const name = input.name.trim();
      if (name === '')
        throw invalid([{ key: 'name', reason: 'required', message: 'a name that is not blank' }]);
      const id = randomUUID();
      try {
        // Counted and added under the account's lock: concurrent additions cannot pass the limit.
        await db.transaction().execute(async (tx) => {
          await repo.lockReturnReasons(accountId, tx);
          if ((await repo.countReturnReasons(accountId, tx)) >= MAX_RETURN_REASONS) {
            throw invalid([
              {
                key: 'name',
                reason: 'too_many',
                message: `at most ${MAX_RETURN_REASONS} return reasons per account`,
              },
            ]);
          }
          await repo.insertReturnReason(accountId, id, name, tx);
        });
      } catch (error) {
        if (isUniqueViolation(error)) {
          throw new AppError('return_reason_taken', {
            message: 'A return reason of that name exists already',
          });
        }
        throw error;
      }
      return { id, name };
    },

    async removeReturnReason(accountId: string, id: string) {
      if (!(await repo.deleteReturnReason(accountId, id))) {
        throw new AppError('not_found', { message: 'Return reason not found' });
      }
    },
  };
}

/**
 * One filter condition: a field of the entity, and exactly the members its op takes; one that
 * could never hold is refused too (a range whose min is above its max, a select value that is
 * none of the field's options).
 */
function checkFilter(
  condition: RuleFilter,
  key: string,
  fieldsByKey: Map<string, FieldDef>,
  problems: ValidationDetail[],
): RuleFilter {
  const field = fieldsByKey.get(condition.field);
  if (!field) {
    problems.push({
      key: `${key}.field`,
      reason: 'unknown_field',
      message: `the entity has no field ${condition.field}`,
    });
  }
  const takes = FILTER_MEMBERS[condition.op];
  for (const member of ALL_FILTER_MEMBERS) {
    if (condition[member] !== undefined && !takes.includes(member)) {
      problems.push({
        key: `${key}.${member}`,
        reason: 'not_allowed',
        message: `${condition.op} takes no ${member}`,
      });
    }
  }
  if (!takes.some((member) => condition[member as keyof RuleFilter] !== undefined)) {
    problems.push({
      key: `${key}.${takes[0]}`,
      reason: 'required',
      message: `${condition.op} needs ${takes.join(' or ')}`,
    });
  }
  if (condition.op === 'range' && !rangeCanHold(condition.min, condition.max)) {
    problems.push({
      key: `${key}.min`,
      reason: 'invalid_range',
      message: `min ${condition.min} is above max ${condition.max}: the range holds nothing`,
    });
  }
  if (field && isSelectField(field)) {
    for (const [at, value] of optionValuesOf(condition, key)) {
      // Compared as a run compares them, so a value taken here is one a record can hold.
      if (!offers(field, value)) {
        problems.push({
          key: at,
          reason: UNKNOWN_OPTION,
          message: `${field.key} has no option ${String(value)}: ${(field.options ?? []).join(', ')}`,
        });
      }
    }
  }
  const stored: RuleFilter = { field: condition.field, op: condition.op };
  for (const member of takes) {
    const value = condition[member as keyof RuleFilter];
    if (value !== undefined) Object.assign(stored, { [member]: value });
  }
  return stored;
}

/** The values an `equals` or `in` condition compares with, each with its detail key under `key`. */
function optionValuesOf(condition: RuleFilter, key: string): [string, unknown][] {
  if (condition.op === 'equals')
    return condition.value === undefined ? [] : [[`${key}.value`, condition.value]];
  if (condition.op === 'in')
    return (condition.values ?? []).map((value, at) => [`${key}.values.${at}`, value]);
  return [];
}

/** A select or multiselect field: the values a record can hold are its options. */
function isSelectField(field: FieldDef): boolean {
  return field.type === 'select' || field.type === 'multiselect';
}

/** Whether a select field (either kind) offers the value, compared as a run compares them. */
function offers(field: FieldDef | undefined, value: unknown): boolean {
  if (!field || !isSelectField(field)) return false;
  return (field.options ?? []).some((option) => sameValue(option, value));
}

export type SetupService = ReturnType<typeof createSetupService>;
