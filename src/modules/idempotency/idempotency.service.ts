import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Executor } from '../../db/types.ts';
import { s2Body } from '../../http/error-handler.ts';
import { AppError, idempotencyKeyRefused } from '../../http/errors.ts';
import type { IdempotencyRef, IdempotencyRepo } from './idempotency.repo.ts';

/** Keys are kept 24 hours (decisions §4). */
const TTL_HOURS = 24;
/** A running claim is renewed while its request works; one left by a dead process is free after this. */
const LEASE_SECONDS = 15;
const RENEW_EVERY_MS = 5_000;
/** A repeat waits this long for the first request's answer before 409 idempotency_key_in_use. */
const DEFAULT_WAIT_MS = 30_000;
/** Decisions §4: 1–255 printable characters (http/schemas.ts, IdempotencyKey). */
const KEY_PATTERN = /^[^\p{C}\p{Zl}\p{Zp}]{1,255}$/u;

export interface StoredAnswer {
  status: number;
  body: unknown;
}

export interface IdempotentResult extends StoredAnswer {
  replayed: boolean;
}

/**
 * How a piece of work stores its answer with the write that makes it, so both commit or neither:
 * `save` inside its transaction, or its own statement writes the row named by `ref` and calls
 * `saved()`.
 */
export interface StoreAnswer {
  ref: IdempotencyRef;
  /**
   * Stores the answer in `tx`. `settling`: the work is committed with it, but a final answer
   * follows with another `save`; repeats meanwhile wait for that one (the interface: the second
   * waits for the first's answer), unless this process dies first: then this answer stands.
   */
  save(tx: Executor, answer: StoredAnswer, settling?: boolean): Promise<void>;
  saved(): void;
  /**
   * The answer names the time its write gave (S1's `created_at`): it is stored by `save` after
   * that write, never computed beforehand for a write that stores it in the same statement.
   */
  namesWriteTime?: boolean;
}

/** Canonical JSON (sorted keys), so that key order does not make two equal bodies differ. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    const out: [string, unknown][] = Object.keys(value)
      .sort()
      .map((key) => [key, canonical((value as Record<string, unknown>)[key])]);
    return out;
  }
  return value;
}

export function requestHash(body: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(canonical(body) ?? null))
    .digest('hex');
}

/** 1–255 printable characters, spaces included (decisions §4). */
/** Whether `key` is a key the rule takes (1–255 printable characters). */
export function isIdempotencyKey(key: unknown): key is string {
  return typeof key === 'string' && KEY_PATTERN.test(key);
}

export function checkIdempotencyKey(key: unknown): string {
  if (!isIdempotencyKey(key)) {
    throw idempotencyKeyRefused();
  }
  return key;
}

/** Answers that are not kept, so that a retry runs afresh (decisions §4). */
function isStorable(status: number): boolean {
  return status !== 401 && status !== 429 && status < 500;
}

export interface IdempotencyServiceDeps {
  repo: IdempotencyRepo;
  waitMs?: number;
  pollMs?: number;
}

export function createIdempotencyService({
  repo,
  waitMs = DEFAULT_WAIT_MS,
  pollMs = 50,
}: IdempotencyServiceDeps) {
  async function waitForAnswer(
    accountId: string,
    ref: IdempotencyRef,
    hash: string,
  ): Promise<IdempotentResult | 'claim'> {
    const deadline = Date.now() + waitMs;
    let delay = pollMs;
    for (;;) {
      const row = await repo.find(accountId, ref);
      if (!row) {
        if (await repo.claim(accountId, ref, hash, LEASE_SECONDS, TTL_HOURS)) return 'claim';
        continue;
      }
      // A settling answer whose process died (its lease ran out) is the answer: its work is written.
      const answered = row.state === 'done' || (row.state === 'settling' && row.lease_expired);
      if (answered && !row.expired) {
        if (row.request_hash !== hash) throw new AppError('idempotency_key_reused');
        return { status: row.status_code ?? 200, body: row.response, replayed: true };
      }
      if (row.request_hash !== hash && row.state !== 'done' && !row.lease_expired) {
        throw new AppError('idempotency_key_reused');
      }
      if (row.lease_expired || row.expired) {
        if (await repo.takeOver(accountId, ref, hash, LEASE_SECONDS, TTL_HOURS)) return 'claim';
        continue;
      }
      if (Date.now() >= deadline) {
        throw new AppError('idempotency_key_in_use', {
          message: 'A request with this idempotency key is still running',
          headers: { 'retry-after': '1' },
        });
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 500);
    }
  }

  return {
    /**
     * Runs `work` at most once per key: a repeat gets the stored answer, a concurrent repeat
     * waits for it (through the database, so across processes too). `work` stores its answer
     * with `store` inside its own transaction; an answer it returns without storing (or an
     * error of a storable status) is stored here.
     */
    async run(
      accountId: string,
      ref: IdempotencyRef,
      body: unknown,
      work: (store: StoreAnswer) => Promise<StoredAnswer>,
      options: {
        /** Runs before a stored answer is handed out (a check of the caller's credential). */
        beforeReplay?: () => Promise<void>;
        /**
         * A cheaper first try for a key no row holds: it writes its answer with the key's row,
         * done, in one statement with its work (IntakeService.intakeOneClaiming), or nothing at
         * all and answers undefined; then the key is claimed as usual.
         */
        firstTry?: (claim: {
          ref: IdempotencyRef;
          requestHash: string;
          ttlHours: number;
        }) => Promise<StoredAnswer | undefined>;
        /** The body of a refusal, as the endpoint's surface spells it (S2 unless told). */
        errorBody?: (error: AppError) => unknown;
      } = {},
    ): Promise<IdempotentResult> {
      const { beforeReplay, firstTry, errorBody = s2Body } = options;
      const hash = requestHash(body);
      if (firstTry) {
        // A first try that failed wrote nothing (its statement is atomic): claim as usual.
        const first = await Promise.resolve()
          .then(() => firstTry({ ref, requestHash: hash, ttlHours: TTL_HOURS }))
          .catch(() => undefined);
        if (first) return { ...first, replayed: false };
      }
      const claimed = (await repo.claim(accountId, ref, hash, LEASE_SECONDS, TTL_HOURS))
        ? 'claim'
        : await waitForAnswer(accountId, ref, hash);
      if (claimed !== 'claim') {
        await beforeReplay?.();
        return claimed;
      }

      let stored = false;
      // The answer stored as settling, until a final one replaces it.
      let settled: StoredAnswer | null = null;
      const store: StoreAnswer = {
        ref,
        async save(tx, answer, settling = false) {
          await repo.complete(accountId, ref, answer.status, answer.body, tx, settling ? 'settling' : 'done');
          stored = true;
          settled = settling ? answer : null;
        },
        saved() {
          stored = true;
        },
      };
      const renew = setInterval(() => {
        repo.renewLease(accountId, ref, LEASE_SECONDS).catch(() => {});
      }, RENEW_EVERY_MS);
      renew.unref();
      try {
        const answer = await work(store);
        if (!stored) {
          if (isStorable(answer.status)) await repo.complete(accountId, ref, answer.status, answer.body);
          else await repo.release(accountId, ref);
        }
        return { ...answer, replayed: false };
      } catch (error) {
        if (error instanceof AppError && isStorable(error.status) && !stored) {
          // The refusal itself is the answer to this key: a repeat gets the same refusal.
          const body = errorBody(error);
          await repo.complete(accountId, ref, error.status, body);
          return { status: error.status, body, replayed: false };
        }
        if (!stored) await repo.release(accountId, ref).catch(() => {});
        // The work is written: what was stored while settling is the answer from now on.
        const standing = settled as StoredAnswer | null;
        if (standing) await repo.complete(accountId, ref, standing.status, standing.body).catch(() => {});
        throw error;
      } finally {
        clearInterval(renew);
      }
    },
  };
}

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;
