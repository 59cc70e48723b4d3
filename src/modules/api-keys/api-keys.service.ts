import { randomUUID } from 'node:crypto';
import type { Executor, Role } from '../../db/types.ts';
import { PERMISSIONS, type Permission } from '../../http/auth.ts';
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
  manages_users: boolean;
  created_at: Date;
}

export function presentKey(row: KeyRow) {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    strict: row.strict,
    permissions: row.permissions,
    manages_users: row.manages_users,
    created_at: iso(row.created_at),
  };
}

export interface CreateKeyInput {
  name: string;
  strict?: boolean;
  permissions?: string[];
}

/**
 * Who makes a key, for what it may do beyond its permissions: users and roles are the owner's
 * (decisions §14), so a key made by a signed-in admin, or by a key that may not manage users,
 * may not either; the operator's, an owner's and such a key's keys may when they hold every
 * permission (`managesUsersOf`). A key makes keys with at most its own permissions (`grantable`).
 */
export type KeyMaker =
  | { kind: 'operator' }
  | { kind: 'session'; role: Role }
  | { kind: 'api_key'; managesUsers: boolean; permissions: string[] };

function makerManagesUsers(maker: KeyMaker): boolean {
  if (maker.kind === 'operator') return true;
  return maker.kind === 'session' ? maker.role === 'owner' : maker.managesUsers;
}

/**
 * Whether the new key may manage users: managing users makes owners, and an owner may do
 * everything (sign in as a user made for the purpose, then read every record, make full keys),
 * so only a key that holds every permission may, and only when its maker may manage users.
 */
function managesUsersOf(maker: KeyMaker, permissions: readonly string[]): boolean {
  return makerManagesUsers(maker) && PERMISSIONS.every((p) => permissions.includes(p));
}

/**
 * The permissions a maker may give: a key only those it holds itself, so that a key with
 * `settings` alone cannot make a key that reads and writes records; the operator and signed-in
 * people (whose role the route checked) every one.
 */
function grantable(maker: KeyMaker): Permission[] {
  if (maker.kind !== 'api_key') return [...PERMISSIONS];
  return PERMISSIONS.filter((p) => maker.permissions.includes(p));
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
    /**
     * Creates a key; the only time its value is returned. A new key gets every permission its
     * maker may give unless told otherwise; asking for one the maker may not give is 403.
     */
    async create(accountId: string, input: CreateKeyInput, maker: KeyMaker, tx?: Executor) {
      const mayGive: readonly string[] = grantable(maker);
      const permissions = input.permissions ?? [...mayGive];
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
      const beyond = permissions.filter((p) => !mayGive.includes(p));
      if (beyond.length > 0) {
        throw new AppError('forbidden', {
          message: `a key cannot give permissions it does not hold: ${[...new Set(beyond)].join(', ')}`,
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
          permissions,
          managesUsers: managesUsersOf(maker, permissions),
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
