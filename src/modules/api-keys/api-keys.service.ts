import { randomUUID } from 'node:crypto';
import type { Executor } from '../../db/types.ts';
import { PERMISSIONS } from '../../http/auth.ts';
import { AppError } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { displayPrefix, generateApiKey, hashSecret } from '../../lib/credentials.ts';
import { decodeCursor, pageOf } from '../../lib/cursor.ts';
import type { ApiKeysRepo } from './api-keys.repo.ts';

interface KeyRow {
  id: string;
  name: string;
  prefix: string;
  strict: boolean;
  permissions: string[];
  created_at: Date;
}

export function presentKey(row: KeyRow) {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    strict: row.strict,
    permissions: row.permissions,
    created_at: iso(row.created_at),
  };
}

export interface CreateKeyInput {
  name: string;
  strict?: boolean;
  permissions?: string[];
}

export function createApiKeysService({
  repo,
  onKeyChanged,
}: {
  repo: ApiKeysRepo;
  /** Called after a key's strict flag or name changed, or it was revoked (credential memory). */
  onKeyChanged?: (accountId: string, keyId: string) => void;
}) {
  return {
    /** Creates a key; the only time its value is returned. A new key gets every permission unless told otherwise. */
    async create(accountId: string, input: CreateKeyInput, tx?: Executor) {
      const permissions = input.permissions ?? [...PERMISSIONS];
      const unknown = permissions.filter((p) => !(PERMISSIONS as readonly string[]).includes(p));
      if (unknown.length > 0) {
        throw new AppError('validation_failed', {
          details: unknown.map((p) => ({
            key: 'permissions',
            reason: 'not_allowed',
            message: `unknown permission ${p}`,
          })),
        });
      }
      const key = generateApiKey();
      const row = await repo.insert(
        accountId,
        {
          id: randomUUID(),
          name: input.name,
          prefix: displayPrefix(key),
          keyHash: hashSecret(key),
          strict: input.strict ?? false,
          permissions: [...new Set(permissions)],
        },
        tx,
      );
      return { ...presentKey(row), key };
    },

    async list(accountId: string, limit: number, cursor: string | undefined) {
      const rows = await repo.listActive(accountId, limit + 1, decodeCursor(cursor));
      const page = pageOf(rows, limit);
      return { api_keys: page.items.map(presentKey), next_cursor: page.nextCursor };
    },

    async update(accountId: string, id: string, changes: { name?: string; strict?: boolean }) {
      const row =
        changes.name === undefined && changes.strict === undefined
          ? await repo.findActive(accountId, id)
          : await repo.update(accountId, id, changes);
      if (!row) throw new AppError('not_found', { message: 'API key not found' });
      onKeyChanged?.(accountId, id);
      return presentKey(row);
    },

    async revoke(accountId: string, id: string) {
      const revoked = await repo.revoke(accountId, id);
      if (!revoked) throw new AppError('not_found', { message: 'API key not found' });
      onKeyChanged?.(accountId, id);
    },
  };
}

export type ApiKeysService = ReturnType<typeof createApiKeysService>;
