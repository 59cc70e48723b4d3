import type { FastifyRequest } from 'fastify';
import type { AuthAccount, Credential } from '../../http/auth.ts';
import { hashSecret, hmacBase64Url, isWellFormedApiKey, safeEqualStrings } from '../../lib/credentials.ts';
import type { AuthRepo } from './auth.repo.ts';

/**
 * A session ends 7 days after its last request (idle) and 30 days after sign-in (absolute),
 * whichever comes first (docs/decisions.md, People and sessions).
 */
export const SESSION_IDLE_MS = 7 * 86_400_000;
export const SESSION_ABSOLUTE_MS = 30 * 86_400_000;
/** The idle end moves on at most once a minute, so that a busy console is not a write per request. */
const SESSION_TOUCH_MS = 60_000;

/** The CSRF token of a session: derived from its cookie, so nothing more is stored. */
export function csrfTokenOf(secret: string, sessionToken: string): string {
  return hmacBase64Url(secret, `csrf.${hashSecret(sessionToken).toString('hex')}`);
}

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

/**
 * How long an API key read from the database is remembered, for the routes whose write checks
 * the key itself (`findApiKey` with `remembered`). Revocation never waits for it: the write
 * refuses a revoked key. Changes of a key's strict flag and of the account's modules or rate
 * limit reach other nodes within this time (the node that made the change forgets at once).
 */
const REMEMBERED_KEY_MS = 10_000;
const REMEMBERED_KEYS_MAX = 10_000;

type ApiKeyCredential = Extract<Credential, { kind: 'api_key' }>;

/** Turns a presented secret into a credential, or null when it is unknown, revoked or expired. */
export function createAuthService({ repo, secret, now = () => new Date() }: AuthServiceDeps) {
  const remembered = new Map<string, { credential: ApiKeyCredential; until: number }>();

  function remember(hashHex: string, credential: ApiKeyCredential) {
    if (remembered.size >= REMEMBERED_KEYS_MAX) {
      // Drop the oldest entry (Map keeps insertion order).
      const oldest = remembered.keys().next().value;
      if (oldest !== undefined) remembered.delete(oldest);
    }
    remembered.set(hashHex, { credential, until: Date.now() + REMEMBERED_KEY_MS });
  }

  function forget(test: (credential: ApiKeyCredential) => boolean) {
    for (const [hash, entry] of remembered) if (test(entry.credential)) remembered.delete(hash);
  }

  function forgetApiKey(accountId: string, keyId: string) {
    forget((credential) => credential.account.id === accountId && credential.keyId === keyId);
  }

  return {
    /**
     * The API key's credential. With `remembered`, a key read from the database in the last
     * seconds is taken without a look-up and comes back with `checked: false`: the caller must
     * then check it (`checkApiKey`, or in the statement of its write) before acting on it.
     */
    async findApiKey(value: string, options: { remembered?: boolean } = {}): Promise<Credential | null> {
      // The checksum refuses a mistyped or invented key without touching the database.
      if (!isWellFormedApiKey(value)) return null;
      const hash = hashSecret(value);
      const hashHex = hash.toString('hex');
      if (options.remembered) {
        const entry = remembered.get(hashHex);
        if (entry && entry.until > Date.now()) return { ...entry.credential, checked: false };
      }
      const row = await repo.findActiveApiKey(hash);
      if (!row) {
        remembered.delete(hashHex);
        return null;
      }
      const credential: ApiKeyCredential = {
        kind: 'api_key',
        account: toAccount(row),
        keyId: row.id,
        keyName: row.name,
        strict: row.strict,
        permissions: row.permissions,
        managesUsers: row.manages_users,
        checked: true,
      };
      remember(hashHex, credential);
      return credential;
    },

    /** Whether an API key taken from memory is still live; a revoked one is forgotten. */
    async checkApiKey(accountId: string, keyId: string): Promise<boolean> {
      if (await repo.isApiKeyLive(accountId, keyId)) return true;
      forgetApiKey(accountId, keyId);
      return false;
    },

    forgetApiKey,

    /** After a change of the account (modules, rate limit) or of one of its keys. */
    forgetAccount(accountId: string) {
      forget((credential) => credential.account.id === accountId);
    },

    /** The session of a cookie's value, looked up every time (no memory: revocation is at once). */
    async findSession(value: string): Promise<Credential | null> {
      if (!value.startsWith('ls_') || value.length > 100) return null;
      const at = now();
      const row = await repo.findLiveSession(hashSecret(value), at, new Date(at.getTime() - SESSION_IDLE_MS));
      if (!row) return null;
      if (at.getTime() - row.last_seen_at.getTime() > SESSION_TOUCH_MS) {
        await repo.touchSession(row.account_id, row.id, at);
      }
      return {
        kind: 'session',
        account: toAccount(row),
        sessionId: row.id,
        via: row.via,
        startedAt: row.created_at,
        user: {
          id: row.user_id,
          email: row.email,
          name: row.name,
          role: row.role,
          hasPassword: row.password_hash !== null,
        },
        csrfToken: csrfTokenOf(secret, value),
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
        form: {
          successUrl: row.success_url,
          errorUrl: row.error_url,
          allowedOrigins: row.allowed_origins,
          honeypotField: row.honeypot_field,
          ratePerMinute: row.rate_limit_per_minute,
        },
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
