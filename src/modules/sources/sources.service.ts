import { randomUUID } from 'node:crypto';
import type { Db, Executor } from '../../db/types.ts';
import { AppError } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { displayPrefix, generateToken, hashSecret } from '../../lib/credentials.ts';
import { decodeCursor, pageOf } from '../../lib/cursor.ts';
import type { SourcesRepo } from './sources.repo.ts';

export function createSourcesService({ db, repo }: { db: Db; repo: SourcesRepo }) {
  /** Revokes whatever token the source has and issues a new one: one active token per source. */
  async function issueToken(accountId: string, sourceId: string, tx: Executor): Promise<string> {
    const token = generateToken('st_');
    await repo.revokeTokens(accountId, sourceId, tx);
    await repo.insertToken(
      accountId,
      { id: randomUUID(), sourceId, prefix: displayPrefix(token), tokenHash: hashSecret(token) },
      tx,
    );
    return token;
  }

  return {
    async create(accountId: string, name: string) {
      return db.transaction().execute(async (tx) => {
        if (await repo.nameTaken(accountId, name, tx)) {
          throw new AppError('name_taken', { message: `A source named ${name} exists` });
        }
        const row = await repo.insert(accountId, { id: randomUUID(), name }, tx);
        const token = await issueToken(accountId, row.id, tx);
        return { id: row.id, name: row.name, token, created_at: iso(row.created_at) };
      });
    },

    async list(accountId: string, limit: number, cursor: string | undefined) {
      const page = pageOf(await repo.list(accountId, limit + 1, decodeCursor(cursor)), limit);
      return {
        sources: page.items.map((row) => ({
          id: row.id,
          name: row.name,
          token_prefix: row.token_prefix ?? null,
          created_at: iso(row.created_at),
        })),
        next_cursor: page.nextCursor,
      };
    },

    async rotateToken(accountId: string, sourceId: string) {
      return db.transaction().execute(async (tx) => {
        if (!(await repo.find(accountId, sourceId, tx)))
          throw new AppError('not_found', { message: 'Source not found' });
        return { token: await issueToken(accountId, sourceId, tx) };
      });
    },

    async revokeToken(accountId: string, sourceId: string) {
      return db.transaction().execute(async (tx) => {
        if (!(await repo.find(accountId, sourceId, tx)))
          throw new AppError('not_found', { message: 'Source not found' });
        await repo.revokeTokens(accountId, sourceId, tx);
      });
    },
  };
}

export type SourcesService = ReturnType<typeof createSourcesService>;
