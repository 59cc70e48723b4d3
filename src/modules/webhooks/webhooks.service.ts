import type { Db } from '../../db/types.ts';
import { AppError, type ValidationDetail } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { decodeCursor, pageOf } from '../../lib/cursor.ts';
import { writtenHttpUrl } from '../../lib/url.ts';
import { ACCOUNT_WEBHOOK, type OutboundService, WEBHOOK_EVENTS } from '../../outbound/outbound.service.ts';
import { MAX_RECOVERED, MAX_WEBHOOKS } from './webhooks.schemas.ts';

type DestinationRow = NonNullable<Awaited<ReturnType<OutboundService['repo']['findDestination']>>>;

function present(row: DestinationRow) {
  return {
    id: row.id,
    url: row.url,
    events: row.events,
    description: row.description,
    enabled: row.enabled,
    disabled_reason: row.disabled_reason,
    failing_since: row.failing_since ? iso(row.failing_since) : null,
    previous_secret_until:
      row.previous_secret_until && row.previous_secret_until > new Date()
        ? iso(row.previous_secret_until)
        : null,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

/** http(s), absolute, no credentials; where it points is checked at each send (the address may change). */
export function checkUrl(url: string, problems: ValidationDetail[]) {
  const parsed = writtenHttpUrl(url);
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    problems.push({
      key: 'url',
      reason: 'invalid_format',
      message: 'an absolute http or https URL, written without blanks or backslashes',
    });
  } else if (parsed.username || parsed.password) {
    problems.push({ key: 'url', reason: 'invalid_format', message: 'credentials in the URL are not sent' });
  }
}

/**
 * `*` is every event and stands alone; a name given twice is refused by the schema
 * (`uniqueItems`, reason `duplicate`), so the list is stored as it was sent.
 */
function checkEvents(events: string[], problems: ValidationDetail[]): string[] {
  for (const event of events) {
    if (event !== '*' && !(WEBHOOK_EVENTS as readonly string[]).includes(event)) {
      problems.push({ key: 'events', reason: 'not_allowed', message: `unknown event ${event}` });
    }
  }
  if (events.includes('*') && events.length > 1) {
    problems.push({
      key: 'events',
      reason: 'not_allowed',
      message: '`*` means every event: give it alone, or name the events',
    });
  }
  return events;
}

function notFound(): AppError {
  return new AppError('not_found', { message: 'Webhook not found' });
}

/** Account webhooks (settings API): endpoints subscribed to events, over the outbound engine's destinations. */
export function createWebhooksService({ db, outbound }: { db: Db; outbound: OutboundService }) {
  async function find(accountId: string, id: string) {
    const row = await outbound.repo.findDestination(accountId, ACCOUNT_WEBHOOK, id);
    if (!row) throw notFound();
    return row;
  }

  return {
    async create(accountId: string, input: { url: string; events: string[]; description?: string }) {
      const problems: ValidationDetail[] = [];
      checkUrl(input.url, problems);
      const events = checkEvents(input.events, problems);
      if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
      // Counted under the account's webhook lock, so that creations at once cannot pass the bound together.
      const { row, secret } = await db.transaction().execute(async (tx) => {
        const { count } = await outbound.repo.countDestinationsLocked(accountId, ACCOUNT_WEBHOOK, tx);
        if (Number(count) >= MAX_WEBHOOKS) {
          throw new AppError('validation_failed', {
            details: [
              { key: 'url', reason: 'too_many', message: `at most ${MAX_WEBHOOKS} webhooks per account` },
            ],
          });
        }
        return outbound.createDestination(
          accountId,
          ACCOUNT_WEBHOOK,
          { url: input.url, events, description: input.description ?? null },
          tx,
        );
      });
      return { ...present(row), secret };
    },

    async list(accountId: string, limit: number, cursor: string | undefined) {
      const rows = await outbound.repo.listDestinations(
        accountId,
        ACCOUNT_WEBHOOK,
        limit + 1,
        decodeCursor(cursor),
      );
      const page = pageOf(rows, limit);
      return { webhooks: page.items.map(present), next_cursor: page.nextCursor };
    },

    async get(accountId: string, id: string) {
      return present(await find(accountId, id));
    },

    async update(
      accountId: string,
      id: string,
      input: {
        url?: string;
        events?: string[];
        description?: string | null;
        enabled?: boolean;
        rotate_secret?: boolean;
      },
    ) {
      const problems: ValidationDetail[] = [];
      if (input.url !== undefined) checkUrl(input.url, problems);
      const events = input.events !== undefined ? checkEvents(input.events, problems) : undefined;
      if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
      const updated = await outbound.updateDestination(
        accountId,
        ACCOUNT_WEBHOOK,
        id,
        { url: input.url, events, description: input.description, enabled: input.enabled },
        input.rotate_secret === true,
      );
      if (!updated) throw notFound();
      return { ...present(updated.row), ...(updated.secret ? { secret: updated.secret } : {}) };
    },

    async remove(accountId: string, id: string) {
      if (!(await outbound.deleteDestination(accountId, ACCOUNT_WEBHOOK, id))) throw notFound();
    },

    /** Sends a `webhook.test` message now (one attempt, recorded) and answers what the receiver said. */
    async test(accountId: string, id: string) {
      await find(accountId, id);
      const messageId = await outbound.enqueueWebhook(db, accountId, {
        destinationId: id,
        type: 'webhook.test',
        data: { webhook_id: id, message: 'A test message from Leadline' },
        maxAttempts: 1,
        sendHere: true,
      });
      const result = await outbound.sendNow(accountId, messageId);
      if (!result)
        throw new AppError('service_unavailable', { message: 'The test message is being sent already' });
      return {
        message_id: messageId,
        delivered: result.ok,
        status_code: result.statusCode,
        body: result.reply,
        error: result.error,
        duration_ms: result.durationMs,
      };
    },

    /**
     * Queues the webhook's failed messages written within the window for one more attempt each,
     * as after an outage of its receiver, at most MAX_RECOVERED a call. A disabled webhook is
     * refused: its messages would fail again at once, unsent.
     */
    async recover(accountId: string, id: string, input: { since: string; until?: string }) {
      const row = await find(accountId, id);
      const since = new Date(input.since);
      const until = input.until === undefined ? new Date() : new Date(input.until);
      if (until <= since) {
        throw new AppError('validation_failed', {
          details: [{ key: 'until', reason: 'out_of_range', message: '`until` must be later than `since`' }],
        });
      }
      if (!row.enabled) {
        throw new AppError('conflict', {
          message:
            'The webhook is disabled: enable it (PATCH {"enabled": true}) before recovering its messages',
        });
      }
      const requeued = await outbound.requeueFailed(accountId, id, { since, until }, MAX_RECOVERED);
      return { requeued: requeued.ids.length, more: requeued.more };
    },

    async attempts(accountId: string, id: string, limit: number, cursor: string | undefined) {
      await find(accountId, id);
      return outbound.attemptsPage(accountId, { destinationId: id }, limit, cursor);
    },
  };
}

export type WebhooksService = ReturnType<typeof createWebhooksService>;
