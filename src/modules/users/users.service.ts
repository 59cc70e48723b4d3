import { randomUUID } from 'node:crypto';
import { AppError } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { decodeCursor, pageOf } from '../../lib/cursor.ts';
import type { UsersRepo } from './users.repo.ts';

export function createUsersService({ repo }: { repo: UsersRepo }) {
  return {
    async create(accountId: string, input: { email: string; name: string }) {
      const row = await repo.insert(accountId, {
        id: randomUUID(),
        email: input.email.trim(),
        name: input.name,
      });
      if (!row) throw new AppError('name_taken', { message: `A user with the email ${input.email} exists` });
      return { id: row.id, email: row.email, name: row.name, created_at: iso(row.created_at) };
    },

    async list(accountId: string, limit: number, cursor: string | undefined) {
      const page = pageOf(await repo.list(accountId, limit + 1, decodeCursor(cursor)), limit);
      return {
        users: page.items.map((u) => ({
          id: u.id,
          email: u.email,
          name: u.name,
          created_at: iso(u.created_at),
        })),
        next_cursor: page.nextCursor,
      };
    },
  };
}

export type UsersService = ReturnType<typeof createUsersService>;
