import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Executor } from '../../db/types.ts';

/** The instance-wide rows of the sign-in limit carry the nil account id (as instance_settings). */
const INSTANCE = '00000000-0000-0000-0000-000000000000';

/**
 * Sessions, sign-in tokens and failed sign-ins. Sign-in starts from an email address or a
 * token, before any account is known: those look-ups (marked) are the only ones here that do
 * not start from an account id.
 */
export function createSessionsRepo(db: Executor) {
  return {
    /** Users of any account with this email address, oldest first (sign-in; no account yet). */
    usersByEmail(email: string, limit: number, tx: Executor = db) {
      return tx
        .selectFrom('users')
        .innerJoin('accounts', 'accounts.id', 'users.account_id')
        .select([
          'users.account_id',
          'users.id',
          'users.email',
          'users.name',
          'users.role',
          'users.password_hash',
          'accounts.name as account_name',
        ])
        .where(sql<string>`lower(users.email)`, '=', email.toLowerCase())
        .orderBy('users.created_at')
        .orderBy('users.id')
        .limit(limit)
        .execute();
    },

    findUser(accountId: string, userId: string, tx: Executor = db) {
      return tx
        .selectFrom('users')
        .select(['account_id', 'id', 'email', 'name', 'role', 'password_hash'])
        .where('account_id', '=', accountId)
        .where('id', '=', userId)
        .executeTakeFirst();
    },

    async insertSession(
      accountId: string,
      session: { userId: string; tokenHash: Buffer; via: 'password' | 'link'; expiresAt: Date },
      tx: Executor = db,
    ) {
      const id = randomUUID();
      await tx
        .insertInto('sessions')
        .values({
          account_id: accountId,
          id,
          user_id: session.userId,
          token_hash: session.tokenHash,
          via: session.via,
          expires_at: session.expiresAt,
        })
        .execute();
      return id;
    },

    async deleteSession(accountId: string, sessionId: string, tx: Executor = db) {
      await tx
        .deleteFrom('sessions')
        .where('account_id', '=', accountId)
        .where('id', '=', sessionId)
        .execute();
    },

    /** Ends every session of the user but `keep` (the one that changed the password). */
    async deleteUserSessions(accountId: string, userId: string, keep: string | null, tx: Executor = db) {
      let query = tx.deleteFrom('sessions').where('account_id', '=', accountId).where('user_id', '=', userId);
      if (keep) query = query.where('id', '!=', keep);
      await query.execute();
    },

    /** The user's sessions past their absolute or idle end (cleared at each sign-in). */
    async deleteEndedSessions(
      accountId: string,
      userId: string,
      now: Date,
      idleMs: number,
      tx: Executor = db,
    ) {
      await tx
        .deleteFrom('sessions')
        .where('account_id', '=', accountId)
        .where('user_id', '=', userId)
        .where((eb) =>
          eb.or([eb('expires_at', '<=', now), eb('last_seen_at', '<=', new Date(now.getTime() - idleMs))]),
        )
        .execute();
    },

    async insertSignInToken(
      accountId: string,
      token: { userId: string; tokenHash: Buffer; expiresAt: Date },
      tx: Executor = db,
    ) {
      await tx
        .insertInto('sign_in_tokens')
        .values({
          account_id: accountId,
          id: randomUUID(),
          user_id: token.userId,
          token_hash: token.tokenHash,
          expires_at: token.expiresAt,
        })
        .execute();
    },

    /**
     * Marks a live token used and names its user, in one statement: of two uses at once (two
     * nodes), one gets the user, the other nothing (by token hash; no account yet).
     */
    useSignInToken(tokenHash: Buffer, now: Date, tx: Executor = db) {
      return tx
        .updateTable('sign_in_tokens')
        .set({ used_at: now })
        .where('token_hash', '=', tokenHash)
        .where('used_at', 'is', null)
        .where('expires_at', '>', now)
        .returning(['account_id', 'user_id'])
        .executeTakeFirst();
    },

    /** The user's tokens that were used or have expired (cleared when a new one is issued). */
    async deleteSpentSignInTokens(accountId: string, userId: string, now: Date, tx: Executor = db) {
      await tx
        .deleteFrom('sign_in_tokens')
        .where('account_id', '=', accountId)
        .where('user_id', '=', userId)
        .where((eb) => eb.or([eb('expires_at', '<=', now), eb('used_at', 'is not', null)]))
        .execute();
    },

    async setPassword(accountId: string, userId: string, passwordHash: string, tx: Executor = db) {
      const result = await tx
        .updateTable('users')
        .set({ password_hash: passwordHash, updated_at: new Date() })
        .where('account_id', '=', accountId)
        .where('id', '=', userId)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    },

    /** Failures of these subjects since `since`: how many, and when the oldest was. */
    async failuresSince(subjects: string[], since: Date, tx: Executor = db) {
      const rows = await tx
        .selectFrom('sign_in_failures')
        .select([
          'subject',
          (eb) => eb.fn.countAll<string>().as('count'),
          (eb) => eb.fn.min('failed_at').as('first'),
        ])
        .where('account_id', '=', INSTANCE)
        .where('subject', 'in', subjects)
        .where('failed_at', '>', since)
        .groupBy('subject')
        .execute();
      return rows.map((row) => ({
        subject: row.subject,
        count: Number(row.count),
        first: new Date(row.first),
      }));
    },

    /** One failure for each subject; rows that left the window are dropped on the way. */
    async insertFailures(subjects: string[], now: Date, forgetBefore: Date, tx: Executor = db) {
      if (subjects.length === 0) return;
      await tx
        .deleteFrom('sign_in_failures')
        .where('account_id', '=', INSTANCE)
        .where('failed_at', '<=', forgetBefore)
        .execute();
      await tx
        .insertInto('sign_in_failures')
        .values(subjects.map((subject) => ({ id: randomUUID(), subject, failed_at: now })))
        .execute();
    },

    async clearFailures(subject: string, tx: Executor = db) {
      await tx
        .deleteFrom('sign_in_failures')
        .where('account_id', '=', INSTANCE)
        .where('subject', '=', subject)
        .execute();
    },
  };
}

export type SessionsRepo = ReturnType<typeof createSessionsRepo>;
