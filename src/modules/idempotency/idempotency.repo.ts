import { sql } from 'kysely';
import { toJson } from '../../db/json.ts';
import { PREPARED } from '../../db/prepared.ts';
import type { Executor } from '../../db/types.ts';

export interface IdempotencyRef {
  scope: string;
  key: string;
}

export function createIdempotencyRepo(db: Executor) {
  return {
    /** Claims the key for a new request; false when a row for it exists. */
    async claim(
      accountId: string,
      ref: IdempotencyRef,
      requestHash: string,
      leaseSeconds: number,
      ttlHours: number,
    ) {
      const row = await db
        .insertInto('idempotency_keys')
        .values({
          account_id: accountId,
          scope: ref.scope,
          key: ref.key,
          request_hash: requestHash,
          state: 'running',
          lease_until: sql<Date>`now() + make_interval(secs => ${leaseSeconds})`,
          expires_at: sql<Date>`now() + make_interval(hours => ${ttlHours})`,
        })
        .onConflict((oc) => oc.columns(['account_id', 'scope', 'key']).doNothing())
        .returning('key')
        .modifyEnd(PREPARED)
        .executeTakeFirst();
      return row !== undefined;
    },

    /** The stored row, with whether its lease has run out (the first request's process died). */
    find(accountId: string, ref: IdempotencyRef) {
      return db
        .selectFrom('idempotency_keys')
        .select([
          'request_hash',
          'state',
          'status_code',
          'response',
          sql<boolean>`lease_until < now()`.as('lease_expired'),
          sql<boolean>`expires_at < now()`.as('expired'),
        ])
        .where('account_id', '=', accountId)
        .where('scope', '=', ref.scope)
        .where('key', '=', ref.key)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    /** Takes over a running claim whose lease ran out, or an expired row; false when someone else did first. */
    async takeOver(
      accountId: string,
      ref: IdempotencyRef,
      requestHash: string,
      leaseSeconds: number,
      ttlHours: number,
    ) {
      const row = await db
        .updateTable('idempotency_keys')
        .set({
          request_hash: requestHash,
          state: 'running',
          status_code: null,
          response: null,
          lease_until: sql<Date>`now() + make_interval(secs => ${leaseSeconds})`,
          expires_at: sql<Date>`now() + make_interval(hours => ${ttlHours})`,
        })
        .where('account_id', '=', accountId)
        .where('scope', '=', ref.scope)
        .where('key', '=', ref.key)
        .where((eb) =>
          eb.or([
            eb.and([eb('state', '=', 'running'), eb('lease_until', '<', sql<Date>`now()`)]),
            eb('expires_at', '<', sql<Date>`now()`),
          ]),
        )
        .returning('key')
        .executeTakeFirst();
      return row !== undefined;
    },

    async renewLease(accountId: string, ref: IdempotencyRef, leaseSeconds: number) {
      await db
        .updateTable('idempotency_keys')
        .set({ lease_until: sql<Date>`now() + make_interval(secs => ${leaseSeconds})` })
        .where('account_id', '=', accountId)
        .where('scope', '=', ref.scope)
        .where('key', '=', ref.key)
        .where('state', 'in', ['running', 'settling'])
        .execute();
    },

    /**
     * Stores the answer; in the caller's transaction when the answer comes with a write.
     * `settling`: the work is written and this answer stands should its process die, but a
     * final one follows (an intake's distribution, once its first attempts were made), which
     * repeats wait for while the lease is renewed.
     */
    async complete(
      accountId: string,
      ref: IdempotencyRef,
      statusCode: number,
      body: unknown,
      tx: Executor = db,
      state: 'done' | 'settling' = 'done',
    ) {
      await tx
        .updateTable('idempotency_keys')
        .set({ state, status_code: statusCode, response: toJson(body) })
        .where('account_id', '=', accountId)
        .where('scope', '=', ref.scope)
        .where('key', '=', ref.key)
        .modifyEnd(PREPARED)
        .execute();
    },

    async release(accountId: string, ref: IdempotencyRef) {
      await db
        .deleteFrom('idempotency_keys')
        .where('account_id', '=', accountId)
        .where('scope', '=', ref.scope)
        .where('key', '=', ref.key)
        .where('state', '=', 'running')
        .modifyEnd(PREPARED)
        .execute();
    },
  };
}

export type IdempotencyRepo = ReturnType<typeof createIdempotencyRepo>;
