import { randomUUID } from 'node:crypto';
import { inTransaction } from '../../db/transaction.ts';
import type { Db, Tx } from '../../db/types.ts';
import { AppError } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { decodeCursor, pageOf } from '../../lib/cursor.ts';
import type { ApiKeysService } from '../api-keys/api-keys.service.ts';
import type { AccountsRepo } from './accounts.repo.ts';

export const DEFAULT_RATE_LIMIT_PER_MINUTE = 1200;
/** The name of a key the operator issues without naming it. */
const OPERATOR_KEY_NAME = 'Operator key';

interface AccountRowLike {
  id: string;
  name: string;
  modules: string[];
  rate_limit_per_minute: number;
  created_at: Date;
}

function present(row: AccountRowLike) {
  return {
    id: row.id,
    name: row.name,
    modules: row.modules,
    rate_limit_per_minute: row.rate_limit_per_minute,
    created_at: iso(row.created_at),
  };
}

export interface CreateAccountInput {
  name: string;
  modules?: string[];
  rate_limit_per_minute?: number;
  isDemo?: boolean;
}

export interface AccountsServiceDeps {
  db: Db;
  repo: AccountsRepo;
  apiKeys: ApiKeysService;
  /** Called after an account's settings change, so cached credentials see it. */
  onAccountChanged?: (accountId: string) => void;
}

export function createAccountsService({ db, repo, apiKeys, onAccountChanged }: AccountsServiceDeps) {
  return {
    /** Creates the account and its first API key in one transaction (the caller's, when given). */
    async create(input: CreateAccountInput, tx?: Tx) {
      return inTransaction(db, tx, async (tx) => {
        const accountId = randomUUID();
        const row = await repo.insert(
          accountId,
          {
            name: input.name,
            modules: [...new Set(input.modules ?? [])].sort(),
            rateLimitPerMinute: input.rate_limit_per_minute ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
            isDemo: input.isDemo,
          },
          tx,
        );
        const key = await apiKeys.create(accountId, { name: 'Initial key' }, { kind: 'operator' }, tx);
        return { ...present(row), api_key: { id: key.id, name: key.name, key: key.key } };
      });
    },

    async get(accountId: string) {
      const row = await repo.find(accountId);
      if (!row) throw new AppError('not_found', { message: 'Account not found' });
      return present(row);
    },

    /**
     * A new API key for the account, made by the operator: the way back into an account whose
     * keys are all revoked and that has no user to sign in (decisions, Credentials).
     */
    async createKey(accountId: string, input: { name?: string; strict?: boolean; permissions?: string[] }) {
      if (!(await repo.find(accountId))) throw new AppError('not_found', { message: 'Account not found' });
      return apiKeys.create(
        accountId,
        { ...input, name: input.name ?? OPERATOR_KEY_NAME },
        { kind: 'operator' },
      );
    },

    async list(limit: number, cursor: string | undefined) {
      const page = pageOf(await repo.list(limit + 1, decodeCursor(cursor)), limit);
      return { accounts: page.items.map(present), next_cursor: page.nextCursor };
    },

    async update(
      accountId: string,
      changes: { name?: string; modules?: string[]; rate_limit_per_minute?: number },
    ) {
      const normalized = { ...changes };
      if (normalized.modules) normalized.modules = [...new Set(normalized.modules)].sort();
      const row =
        Object.keys(normalized).length === 0
          ? await repo.find(accountId)
          : await repo.update(accountId, normalized);
      if (!row) throw new AppError('not_found', { message: 'Account not found' });
      onAccountChanged?.(accountId);
      return present(row);
    },
  };
}

export type AccountsService = ReturnType<typeof createAccountsService>;
