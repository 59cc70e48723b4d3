import type { FastifyRequest } from 'fastify';
import type { AuthAccount, Credential } from '../../http/auth.ts';
import { hashSecret, hmacBase64Url, isWellFormedApiKey, safeEqualStrings } from '../../lib/credentials.ts';
import type { AuthRepo } from './auth.repo.ts';

/** Signed document addresses live 30 minutes (interface: Authentication 5). */
export const SIGNED_URL_TTL_SECONDS = 30 * 60;
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface AccountColumns {
  account_id: string;
  account_name: string;
  account_modules: string[];
  account_rate_limit: number;
}

function toAccount(row: AccountColumns): AuthAccount {
  return {
    id: row.account_id,
    name: row.account_name,
    modules: row.account_modules,
    rateLimitPerMinute: row.account_rate_limit,
  };
}

export function documentSignature(secret: string, documentId: string, exp: number): string {
  return hmacBase64Url(secret, `${documentId}.${exp}`);
}

export interface AuthServiceDeps {
  repo: AuthRepo;
  secret: string;
  now?: () => Date;
}

/** Turns a presented secret into a credential, or null when it is unknown, revoked or expired. */
export function createAuthService({ repo, secret, now = () => new Date() }: AuthServiceDeps) {
  return {
    async findApiKey(value: string): Promise<Credential | null> {
      // The checksum refuses a mistyped or invented key without touching the database.
      if (!isWellFormedApiKey(value)) return null;
      const row = await repo.findActiveApiKey(hashSecret(value));
      if (!row) return null;
      return {
        kind: 'api_key',
        account: toAccount(row),
        keyId: row.id,
        keyName: row.name,
        strict: row.strict,
        permissions: row.permissions,
      };
    },

    async findSourceToken(value: string): Promise<Credential | null> {
      if (!value.startsWith('st_') || value.length > 100) return null;
      const row = await repo.findActiveSourceToken(hashSecret(value));
      if (!row) return null;
      return {
        kind: 'source_token',
        account: toAccount(row),
        sourceId: row.source_id,
        sourceName: row.source_name,
      };
    },

    async findRecordToken(value: string): Promise<Credential | null> {
      if (!value.startsWith('rt_') || value.length > 100) return null;
      const row = await repo.findLiveRecordToken(hashSecret(value), now());
      if (!row) return null;
      return {
        kind: 'record_token',
        account: toAccount(row),
        tokenId: row.id,
        recordId: row.record_id,
        fields: row.fields,
      };
    },

    /** `exp` + `sig` on a document address: valid for that one document until `exp`. */
    async findSignedDocument(request: FastifyRequest): Promise<Credential | null> {
      const query = request.query as { exp?: unknown; sig?: unknown };
      const documentId = (request.params as { id?: unknown }).id;
      if (typeof query.exp !== 'string' || typeof query.sig !== 'string' || typeof documentId !== 'string')
        return null;
      if (!UUID_PATTERN.test(documentId) || !/^\d{1,12}$/.test(query.exp)) return null;
      const exp = Number(query.exp);
      const nowSeconds = Math.floor(now().getTime() / 1000);
      if (exp <= nowSeconds || exp > nowSeconds + SIGNED_URL_TTL_SECONDS) return null;
      if (!safeEqualStrings(query.sig, documentSignature(secret, documentId.toLowerCase(), exp))) return null;
      const row = await repo.findDocumentAccount(documentId);
      if (!row) return null;
      return { kind: 'signed_url', account: toAccount(row), documentId: row.id };
    },
  };
}

export type AuthService = ReturnType<typeof createAuthService>;
