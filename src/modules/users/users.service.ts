import { randomUUID } from 'node:crypto';
import type { Db, Executor, Role } from '../../db/types.ts';
import { AppError, notFound } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { decodeCursor, pageOf } from '../../lib/cursor.ts';
import type { Language } from '../people/sign-in.texts.ts';
import type { UsersRepo } from './users.repo.ts';

function present(row: { id: string; email: string; name: string; role: Role; created_at: Date }) {
  return { id: row.id, email: row.email, name: row.name, role: row.role, created_at: iso(row.created_at) };
}

/**
 * Users per account (docs/decisions.md, People and sessions): one page of the users list (its
 * `limit` goes to 500), which the console's users screen reads whole; far more people than the
 * teams Leadline serves, and a bound like every other list an account writes.
 */
export const MAX_USERS = 500;

export interface UsersServiceDeps {
  db: Db;
  repo: UsersRepo;
  /** Ends every session of a user (sessions service), inside the change's transaction. */
  revokeSessions: (accountId: string, userId: string, tx: Executor) => Promise<void>;
  /** Emails a person just added a sign-in link (sessions service), in the creation's transaction. */
  invite: (
    tx: Executor,
    accountId: string,
    invitee: { id: string; email: string; name: string; accountName: string },
    language: Language,
  ) => Promise<Date>;
}

/**
 * The account's people (decisions §14): the first is its owner, and an account always keeps
 * one. Every change that counts owners locks the account's row first, so that two at once
 * take turns.
 */
export function createUsersService({ db, repo, revokeSessions, invite }: UsersServiceDeps) {
  return {
    async create(
      accountId: string,
      input: { email: string; name: string; role?: Role; invite?: boolean; language?: Language },
      tx?: Executor,
    ): Promise<ReturnType<typeof present> & { invited_until?: string }> {
      // The language is the invitation's: given alone it would do nothing.
      if (input.language !== undefined && !input.invite) {
        throw new AppError('validation_failed', {
          details: [
            {
              key: 'language',
              reason: 'not_allowed',
              message: 'the language of an invitation: give it with invite: true',
            },
          ],
        });
      }
      const run = async (tx: Executor) => {
        // The account's row lock serialises creations: two at once cannot pass the bound together.
        const accountName = (await repo.lockAccount(accountId, tx)) ?? '';
        const count = await repo.countUsers(accountId, tx);
        if (count >= MAX_USERS) {
          throw new AppError('validation_failed', {
            details: [
              { key: 'email', reason: 'too_many', message: `at most ${MAX_USERS} users per account` },
            ],
          });
        }
        const first = count === 0;
        const row = await repo.insert(
          accountId,
          {
            id: randomUUID(),
            email: input.email.trim(),
            name: input.name,
            role: first ? 'owner' : (input.role ?? 'member'),
          },
          tx,
        );
        if (!row)
          throw new AppError('name_taken', { message: `A user with the email ${input.email} exists` });
        if (!input.invite) return present(row);
        const until = await invite(tx, accountId, { ...row, accountName }, input.language ?? 'en');
        return { ...present(row), invited_until: iso(until) };
      };
      return tx ? run(tx) : db.transaction().execute(run);
    },

    async list(accountId: string, limit: number, cursor: string | undefined) {
      const page = pageOf(await repo.list(accountId, limit + 1, decodeCursor(cursor)), limit);
      return { users: page.items.map(present), next_cursor: page.nextCursor };
    },

    async get(accountId: string, id: string) {
      const row = await repo.find(accountId, id);
      if (!row) throw notFound('No such user');
      return present(row);
    },

    /**
     * A new name or role. Either ends the person's sessions at once (decisions §14: PATCH and
     * DELETE revoke that user's sessions), also the caller's own when owners change themselves.
     */
    async update(accountId: string, id: string, changes: { name?: string; role?: Role }) {
      return db.transaction().execute(async (tx) => {
        await repo.lockAccount(accountId, tx);
        const before = await repo.find(accountId, id, tx);
        if (!before) throw notFound('No such user');
        const demoted = before.role === 'owner' && changes.role !== undefined && changes.role !== 'owner';
        if (demoted && (await repo.countOwners(accountId, tx)) <= 1) throw new AppError('last_owner');
        if (changes.name === undefined && changes.role === undefined) return present(before);
        const row = await repo.update(accountId, id, changes, tx);
        if (!row) throw notFound('No such user');
        await revokeSessions(accountId, id, tx);
        return present(row);
      });
    },

    /**
     * Removes a person: their sessions end at once, and the records they were assignee or
     * viewer of stay, without them.
     */
    async remove(accountId: string, id: string): Promise<void> {
      await db.transaction().execute(async (tx) => {
        await repo.lockAccount(accountId, tx);
        const user = await repo.find(accountId, id, tx);
        if (!user) throw notFound('No such user');
        if (user.role === 'owner' && (await repo.countOwners(accountId, tx)) <= 1)
          throw new AppError('last_owner');
        await revokeSessions(accountId, id, tx);
        await repo.releaseRecords(accountId, id, tx);
        await repo.delete(accountId, id, tx);
      });
    },
  };
}

export type UsersService = ReturnType<typeof createUsersService>;
