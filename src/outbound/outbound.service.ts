import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { Db, Executor } from '../db/types.ts';
import { iso } from '../http/schemas.ts';
import { inBackground } from '../jobs/background.ts';
import { createBatcher } from '../lib/batcher.ts';
import { decodeCursor, pageOf } from '../lib/cursor.ts';
import { timeOrderedId } from '../lib/ids.ts';
import type { AddressPolicy } from './address-policy.ts';
import type { AttemptResult } from './attempt.ts';
import type { WebhookEvent } from './events.ts';
import { createGuardedFetcher } from './guarded-fetch.ts';
import { createMailSender, type EmailContent } from './mail-sender.ts';
import {
  type AttemptsOf,
  type ClaimedMessage,
  createOutboundRepo,
  type FinishedAttempt,
  type NewMessageRow,
} from './outbound.repo.ts';
import { DEFAULT_RETRY_SCHEDULE_S } from './retry-schedule.ts';
import { createSecretBox, generateWebhookSecret } from './signing.ts';
import { createStallGuard } from './stall-guard.ts';
import { createWebhookSender } from './webhook-sender.ts';

/**
 * The outbound engine (decisions §12): modules say inside their transaction *what* to send
 * (`emitEvent`, `enqueueWebhook`, `enqueueEmail`); the message row is the outbox, written by
 * that transaction, and only workers (the dispatcher) or an explicit `sendNow` send it, after
 * the commit. The engine owns signing, the address guard, timeouts, retries, attempts and the
 * disabling of failing destinations.
 */

export { WEBHOOK_EVENTS, type WebhookEvent } from './events.ts';

/** The destinations of account webhooks (settings API); later modules use their own purposes. */
export const ACCOUNT_WEBHOOK = 'account';

/** A Retry-After beyond a day is not waited for longer than a day. */
const MAX_RETRY_AFTER_MS = 86_400_000;

/** What a module's hook learns after each attempt of a message that names it. */
export interface MessageOutcome {
  accountId: string;
  messageId: string;
  ref: string | null;
  /** `pending` while retries are left, else final. */
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  error: string | null;
  statusCode: number | null;
  /** The receiver answered 410 (its destination is disabled). */
  gone: boolean;
}

/** Runs in the transaction that writes the attempt, so that a module's own state moves with it. */
export type OutcomeHook = (tx: Executor, outcome: MessageOutcome) => Promise<void>;

export interface OutboundOptions {
  /** Instance secret: webhook secrets are encrypted at rest with a key derived from it. */
  secret: string;
  allowPrivate: boolean;
  /** Replaces the address rule (tests). */
  policy?: AddressPolicy;
  /** Bound of one webhook attempt, body included (15 s). */
  webhookTimeoutMs?: number;
  /** Delays before each retry, in ms; the length is the number of retries. */
  retryScheduleMs?: number[];
  /** An account webhook whose messages all failed this long is disabled (5 days). */
  disableAfterMs?: number;
  smtpUrl?: string;
  mailFrom?: string;
  /** Where email goes without SMTP: one `<id>.eml` per message. */
  outboxDir?: string;
  /** How long a claimed message stays with its sender before another may take it (60 s). */
  leaseMs?: number;
  /** How long an account's subscriptions are remembered (2 s). */
  subscriptionsTtlMs?: number;
}

const MAX_CACHED_ACCOUNTS = 10_000;
const MAX_OPENED_SECRETS = 1_000;
/** The stall guard's key for email: every message goes through the one SMTP server. */
const SMTP_ENDPOINT = 'smtp';
/** Successful attempts written by one statement at most. */
const MAX_FINISH_BATCH = 64;

export function createOutboundService(db: Db, options: OutboundOptions) {
  const repo = createOutboundRepo(db);
  const box = createSecretBox(options.secret);
  const webhookTimeoutMs = options.webhookTimeoutMs ?? 15_000;
  const schedule = options.retryScheduleMs ?? DEFAULT_RETRY_SCHEDULE_S.map((s) => s * 1000);
  const disableAfterMs = options.disableAfterMs ?? 432_000_000;
  const leaseMs = options.leaseMs ?? Math.max(60_000, webhookTimeoutMs * 4);
  const ttlMs = options.subscriptionsTtlMs ?? 2_000;
  const fetcher = createGuardedFetcher({
    allowPrivate: options.allowPrivate,
    policy: options.policy,
    timeoutMs: webhookTimeoutMs,
    userAgent: 'Leadline-Webhooks/1.0',
    // As many as the dispatcher sends at once (dispatcher.ts).
    reuseConnections: 16,
  });
  const sendWebhook = createWebhookSender(fetcher);
  const mail = createMailSender({
    smtpUrl: options.smtpUrl,
    from: options.mailFrom ?? 'Leadline <leadline@localhost>',
    outboxDir: options.outboxDir ?? path.resolve('data', 'outbox'),
  });
  const hooks = new Map<string, OutcomeHook>();
  const stalls = createStallGuard();
  const cache = new Map<string, { until: number; subscriptions: { id: string; events: string[] }[] }>();
  /** Told after messages were written, and whether a request (not the workers' own work) wrote them. */
  let onEnqueued: (byRequest: boolean) => void = () => {};
  const enqueued = () => onEnqueued(!inBackground());
  /** Told after a failed attempt was written with a retry due at the given time. */
  let onRetryWritten: (dueAt: Date) => void = () => {};

  async function subscriptionsOf(accountId: string, tx?: Executor) {
    const cached = cache.get(accountId);
    if (cached && cached.until > Date.now()) return cached.subscriptions;
    // Inside a transaction the read goes through it: on the embedded database the transaction
    // holds the only connection.
    const subscriptions = await repo.subscriptions(accountId, ACCOUNT_WEBHOOK, tx ?? db);
    if (cache.size >= MAX_CACHED_ACCOUNTS) cache.delete(cache.keys().next().value!);
    cache.set(accountId, { until: Date.now() + ttlMs, subscriptions });
    return subscriptions;
  }

  async function subscribers(accountId: string, type: WebhookEvent, tx?: Executor): Promise<string[]> {
    const subscriptions = await subscriptionsOf(accountId, tx);
    if (subscriptions.length === 0) return [];
    return subscriptions
      .filter((subscription) => subscription.events.includes('*') || subscription.events.includes(type))
      .map((subscription) => subscription.id);
  }

  /** The body of a webhook as stored and sent: `{type, timestamp, data}`. */
  function envelope(type: string, data: unknown) {
    return { type, timestamp: new Date().toISOString(), data };
  }

  /**
   * Secrets opened lately, by their sealed text: every message to a destination would otherwise
   * decrypt the same secret again (a tenth of the engine's CPU per message at intake's pace).
   * The process holds the key anyway; a rotated secret has a new sealed text.
   */
  const opened = new Map<string, string>();
  function openSecret(sealed: string): string {
    let plain = opened.get(sealed);
    if (plain === undefined) {
      plain = box.open(sealed);
      if (opened.size >= MAX_OPENED_SECRETS) opened.delete(opened.keys().next().value!);
      opened.set(sealed, plain);
    }
    return plain;
  }

  /** The next try's delay, or null when the message is done trying. */
  function retryDelay(message: ClaimedMessage, result: AttemptResult): number | null {
    if (!result.retry) return null;
    const allowed = Math.min(message.max_attempts ?? schedule.length + 1, schedule.length + 1);
    if (message.attempts >= allowed) return null;
    const delay = schedule[message.attempts - 1]! * (1 + Math.random() * 0.1);
    const asked = result.retryAfterMs;
    return asked !== null && asked > delay ? Math.min(asked, MAX_RETRY_AFTER_MS) : delay;
  }

  function failure(error: string, retry: boolean): AttemptResult {
    return {
      ok: false,
      statusCode: null,
      reply: null,
      error,
      retry,
      gone: false,
      retryAfterMs: null,
      durationMs: 0,
    };
  }

  /**
   * One attempt through the stall guard (stall-guard.ts): while the endpoint is stalled on this
   * process and its probe is out, it fails at once without a request. Email has one endpoint,
   * the SMTP server. A test message always goes out (that is how an owner checks a fix), and
   * its answer ends a stall like any other.
   */
  async function guarded(
    endpoint: string,
    send: () => Promise<AttemptResult>,
    always = false,
  ): Promise<AttemptResult> {
    const admission = stalls.admit(endpoint, always);
    if (admission.kind === 'refuse') return failure('endpoint_unresponsive', true);
    const result = await send();
    stalls.settle(endpoint, admission, result.error === 'timeout');
    return result;
  }

  async function attemptOf(message: ClaimedMessage): Promise<AttemptResult> {
    if (message.channel === 'email')
      return guarded(SMTP_ENDPOINT, () => mail.send(message.id, message.payload as EmailContent));
    if (!message.url || !message.secret || !message.destination_id)
      return failure('destination_missing', false);
    // A test message reaches a disabled endpoint too: that is how its owner checks a fix.
    const test = message.event_type === 'webhook.test';
    if (!message.enabled && !test) return failure('destination_disabled', false);
    const secrets = [openSecret(message.secret)];
    if (message.previous_secret) secrets.push(openSecret(message.previous_secret));
    const { url, id } = message;
    const body = JSON.stringify(message.payload);
    return guarded(message.destination_id, () => sendWebhook({ url, id, body, secrets }), test);
  }

  /**
   * One attempt of a claimed message, and what follows from it, written after the send;
   * `onSent` learns when the send is over and only the writing is left.
   */
  async function deliver(
    message: ClaimedMessage,
    claimId: string,
    onSent?: () => void,
  ): Promise<AttemptResult> {
    const result = await attemptOf(message).catch((error: unknown) =>
      failure(`internal_error: ${(error as Error).message}`.slice(0, 200), true),
    );
    const delay = result.ok ? null : retryDelay(message, result);
    const status = result.ok ? 'delivered' : delay === null ? 'failed' : 'pending';
    const finished = {
      accountId: message.account_id,
      messageId: message.id,
      claimId,
      destinationId: message.destination_id,
      attempt: message.attempts,
      status,
      nextAttemptAt: delay === null ? null : new Date(Date.now() + delay),
      ok: result.ok,
      statusCode: result.statusCode,
      reply: result.reply,
      error: result.error,
      durationMs: result.durationMs,
      gone: result.gone,
      disableAfterMs,
    } as const;
    onSent?.();
    const hook = message.notify ? hooks.get(message.notify) : undefined;
    let written = false;
    if (!hook && result.ok) {
      await deliveredWrites.submit('', finished);
    } else if (!hook) {
      written = await repo.finishAttempt(finished);
    } else {
      written = await db.transaction().execute(async (tx) => {
        if (!(await repo.finishAttempt(finished, tx))) return false;
        await hook(tx, {
          accountId: message.account_id,
          messageId: message.id,
          ref: message.ref,
          status,
          attempts: message.attempts,
          error: result.error,
          statusCode: result.statusCode,
          gone: result.gone,
        });
        return true;
      });
    }
    if (written && finished.nextAttemptAt) onRetryWritten(finished.nextAttemptAt);
    if (message.destination_id && (result.gone || !result.ok)) cache.delete(message.account_id);
    return result;
  }

  /**
   * Successful attempts without a hook are written together, those that finish while earlier
   * batches are being written in the next statement, as intake groups its creations. Failures,
   * and messages with a hook, keep a statement (or transaction) of their own.
   */
  const deliveredWrites = createBatcher<FinishedAttempt, boolean>({
    maxBatch: MAX_FINISH_BATCH,
    maxInFlight: 2,
    run: async (_group, attempts) => {
      const written = await repo.finishDelivered(attempts);
      return attempts.map((attempt) => written.has(attempt.messageId));
    },
  });

  async function write(tx: Executor, accountId: string, rows: NewMessageRow[]) {
    await repo.insertMessages(accountId, rows, tx);
    if (rows.length > 0) enqueued();
  }

  return {
    repo,
    describeMail: () => mail.describe(),

    /** Enabled account webhooks of the account subscribed to `type` (remembered for a few seconds). */
    subscribers,

    /** Forgets an account's subscriptions on this node (after a change of its webhooks). */
    forgetSubscriptions(accountId: string) {
      cache.delete(accountId);
    },

    /** Writes one message per subscribed account webhook, in the caller's transaction. */
    async emitEvent(tx: Executor, accountId: string, type: WebhookEvent, data: unknown): Promise<void> {
      const targets = await subscribers(accountId, type, tx);
      if (targets.length === 0) return;
      const payload = envelope(type, data);
      await write(
        tx,
        accountId,
        targets.map((destinationId) => ({
          id: timeOrderedId(),
          channel: 'webhook',
          destinationId,
          eventType: type,
          payload,
        })),
      );
    },

    /** A webhook to one destination (any purpose), in the caller's transaction; answers the message id. */
    async enqueueWebhook(
      tx: Executor,
      accountId: string,
      message: {
        destinationId: string;
        type: string;
        data: unknown;
        notify?: string;
        ref?: string;
        /** What sent it, when its attempts are listed by that (an automation). */
        originId?: string;
        maxAttempts?: number;
        /**
         * The caller sends it itself with `sendNow` after the commit: the dispatcher leaves it
         * alone for a lease's time (and sends it after that if the caller never did).
         */
        sendHere?: boolean;
      },
    ): Promise<string> {
      const id = timeOrderedId();
      const row: NewMessageRow = {
        id,
        channel: 'webhook',
        destinationId: message.destinationId,
        eventType: message.type,
        payload: envelope(message.type, message.data),
        notify: message.notify,
        ref: message.ref,
        originId: message.originId,
        maxAttempts: message.maxAttempts,
      };
      if (message.sendHere) {
        await repo.insertMessages(accountId, [{ ...row, notBefore: new Date(Date.now() + leaseMs) }], tx);
        return id;
      }
      await write(tx, accountId, [row]);
      return id;
    },

    /** An email, in the caller's transaction; answers the message id. */
    async enqueueEmail(
      tx: Executor,
      accountId: string,
      content: EmailContent,
      options: { type?: string; notify?: string; ref?: string; originId?: string } = {},
    ): Promise<string> {
      const id = timeOrderedId();
      await write(tx, accountId, [
        {
          id,
          channel: 'email',
          destinationId: null,
          eventType: options.type ?? 'email',
          payload: content,
          notify: options.notify,
          ref: options.ref,
          originId: options.originId,
        },
      ]);
      return id;
    },

    /** Registers the hook a module names in `notify`; every node that sends must register it. */
    onOutcome(name: string, hook: OutcomeHook) {
      if (hooks.has(name)) throw new Error(`outcome hook ${name} is registered twice`);
      hooks.set(name, hook);
    },

    /** Says that messages were written outside `emitEvent` and the enqueue functions (one-statement intake). */
    enqueued() {
      enqueued();
    },

    /**
     * Called after messages were written (the dispatcher looks for due work sooner), with whether
     * a request wrote them (the dispatcher paces its claims only for those).
     */
    setEnqueuedListener(listener: (byRequest: boolean) => void) {
      onEnqueued = listener;
    },

    /**
     * Called after an attempt was written with a retry (its message's `next_attempt_at`), from
     * the dispatcher's sends and from `sendNow`: the dispatcher wakes then instead of at its
     * next look.
     */
    setRetryListener(listener: (dueAt: Date) => void) {
      onRetryWritten = listener;
    },

    /**
     * Sends one message now from this process (a webhook test), unless another sender holds it;
     * answers the attempt, or null when it was not this process's to send.
     */
    async sendNow(accountId: string, messageId: string): Promise<AttemptResult | null> {
      const claimId = randomUUID();
      const message = await repo.claimOne(accountId, messageId, leaseMs, claimId);
      return message ? deliver(message, claimId) : null;
    },

    /**
     * Sends one message now, outside the outbox: no message row, no attempt row, no retry (a
     * test delivery, which records nothing). A webhook goes to a destination (disabled or not,
     * as a test reaches a disabled endpoint) signed with its secrets; answers the attempt and
     * what was sent.
     */
    async sendUnrecorded(
      accountId: string,
      message:
        | { channel: 'webhook'; purpose: string; destinationId: string; type: string; data: unknown }
        | { channel: 'email'; content: EmailContent },
    ): Promise<{ result: AttemptResult; request: { url: string; body: string } } | null> {
      const id = randomUUID();
      // A test goes out whatever a stall; its outcome counts like any attempt's (stall-guard.ts).
      if (message.channel === 'email') {
        const result = await guarded(SMTP_ENDPOINT, () => mail.send(id, message.content), true);
        return {
          result,
          request: { url: `mailto:${message.content.to.join(',')}`, body: message.content.text ?? '' },
        };
      }
      const destination = await repo.destinationForSending(accountId, message.purpose, message.destinationId);
      if (!destination) return null;
      const body = JSON.stringify(envelope(message.type, message.data));
      const secrets = [openSecret(destination.secret)];
      if (destination.previous_secret) secrets.push(openSecret(destination.previous_secret));
      const url = destination.url;
      const result = await guarded(
        message.destinationId,
        () => sendWebhook({ url, id, body, secrets }),
        true,
      );
      return { result, request: { url, body } };
    },

    /** Due messages leased to a new claim, for the dispatcher. */
    async claimDue(limit: number) {
      const claimId = randomUUID();
      const messages = await repo.claimDue(limit, leaseMs, claimId);
      return { claimId, messages };
    },

    deliver,

    // Destinations (webhook endpoints); the secret is returned in clear only here, once.

    async createDestination(
      accountId: string,
      purpose: string,
      input: { url: string; events: string[]; description: string | null },
      tx: Executor = db,
    ) {
      const secret = generateWebhookSecret();
      const row = await repo.insertDestination(
        accountId,
        { id: randomUUID(), purpose, secret: box.seal(secret), ...input },
        tx,
      );
      cache.delete(accountId);
      return { row, secret };
    },

    async updateDestination(
      accountId: string,
      purpose: string,
      id: string,
      changes: { url?: string; events?: string[]; description?: string | null; enabled?: boolean },
      rotateSecret: boolean,
      tx: Executor = db,
    ) {
      const secret = rotateSecret ? generateWebhookSecret() : null;
      const row = await repo.updateDestination(
        accountId,
        purpose,
        id,
        {
          ...changes,
          ...(secret
            ? { rotate: { secret: box.seal(secret), previousUntil: new Date(Date.now() + 86_400_000) } }
            : {}),
        },
        tx,
      );
      cache.delete(accountId);
      return row ? { row, secret } : undefined;
    },

    async deleteDestination(accountId: string, purpose: string, id: string, tx: Executor = db) {
      const deleted = await repo.deleteDestination(accountId, purpose, id, tx);
      cache.delete(accountId);
      return deleted !== undefined;
    },

    /** Deletes the messages of a destination its module deleted itself (with its attempts). */
    deleteMessagesOf(accountId: string, destinationId: string, tx: Executor = db) {
      return repo.deleteMessagesOf(accountId, destinationId, tx);
    },

    /**
     * Requeues a destination's failed messages written within the window for one more attempt
     * each (see repo.requeueFailed); the dispatcher looks for them at once.
     */
    async requeueFailed(
      accountId: string,
      destinationId: string,
      window: { since: Date; until: Date },
      limit: number,
    ) {
      const requeued = await repo.requeueFailed(accountId, destinationId, window, limit);
      if (requeued.ids.length > 0) enqueued();
      return requeued;
    },

    /**
     * A page of the attempts of a destination's messages or of one origin's (an automation's),
     * newest first, as the attempts listings answer it.
     */
    async attemptsPage(accountId: string, of: AttemptsOf, limit: number, cursor: string | undefined) {
      const rows = await repo.listAttempts(accountId, of, limit + 1, decodeCursor(cursor));
      const page = pageOf(rows, limit);
      return {
        attempts: page.items.map((row) => ({
          id: row.id,
          message_id: row.message_id,
          event: row.event_type,
          attempt: row.attempt,
          outcome: row.outcome,
          status_code: row.status_code,
          response: row.reply,
          error: row.error,
          duration_ms: row.duration_ms,
          attempted_at: iso(row.created_at),
        })),
        next_cursor: page.nextCursor,
      };
    },

    /** Messages and attempts past `maxAgeMs` go (maintenance). */
    prune(maxAgeMs: number, batchSize = 5_000) {
      return repo.pruneMessages(new Date(Date.now() - maxAgeMs), batchSize);
    },

    close() {
      mail.close();
      void fetcher.close();
    },
  };
}

export type OutboundService = ReturnType<typeof createOutboundService>;
