import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hashSecret, safeEqual, safeEqualStrings } from '../lib/credentials.ts';
import type { AuthService } from '../modules/auth/auth.service.ts';
import { AppError } from './errors.ts';

export const PERMISSIONS = [
  'records:read',
  'records:write',
  'notes:write',
  'documents:read',
  'crm',
  'distribution',
  'booking',
  'settings',
] as const;
export type Permission = (typeof PERMISSIONS)[number];

export const MODULES = ['crm', 'distribution', 'booking'] as const;

/** A person's roles, from least to most (decisions §14). */
export const ROLES = ['viewer', 'member', 'admin', 'owner'] as const;
export type Role = (typeof ROLES)[number];

/** The session cookie (decisions §14). */
export const SESSION_COOKIE = 'leads_session';
/** Methods that change state: with the session cookie they need `X-CSRF-Token`. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
export type ModuleName = (typeof MODULES)[number];

export interface AuthAccount {
  id: string;
  name: string;
  modules: string[];
  rateLimitPerMinute: number;
}

/** A source's website-form settings, read with its token (decisions §13). */
export interface SourceFormSettings {
  successUrl: string | null;
  errorUrl: string | null;
  /** Normalized origins (scheme://host[:port]); empty lets any origin post. */
  allowedOrigins: string[];
  honeypotField: string | null;
  ratePerMinute: number;
}

export type Credential =
  | {
      kind: 'api_key';
      account: AuthAccount;
      keyId: string;
      keyName: string;
      strict: boolean;
      permissions: string[];
      /** Whether the key may create, change and remove users (api_keys.manages_users). */
      managesUsers: boolean;
      /**
       * False when the key was taken from memory without a look-up (routes with
       * `rememberedKey`): the handler checks it before it acts (AuthService.findApiKey).
       */
      checked: boolean;
    }
  | {
      kind: 'source_token';
      account: AuthAccount;
      sourceId: string;
      sourceName: string;
      /** What the source's intake does for a browser's form post (decisions §13). */
      form: SourceFormSettings;
    }
  | { kind: 'record_token'; account: AuthAccount; tokenId: string; recordId: string; fields: string[] }
  | { kind: 'signed_url'; account: AuthAccount; documentId: string }
  | {
      /** A person signed in to the console: the session cookie (decisions §14). */
      kind: 'session';
      account: AuthAccount;
      sessionId: string;
      /** How the session was started, and when (a link's session may set a password). */
      via: 'password' | 'link';
      startedAt: Date;
      user: { id: string; email: string; name: string; role: Role; hasPassword: boolean };
      csrfToken: string;
    }
  | { kind: 'admin' };

export type CredentialKind = Credential['kind'];

/**
 * What a route accepts, in its `config.auth`: the credential kinds, the permission an API key
 * needs, and the module the account must have booked. Routes without it are public.
 */
export interface RouteAuth {
  accept: CredentialKind[];
  permission?: Permission;
  module?: ModuleName;
  /**
   * The route's handler checks the API key itself, in the statement of its write or before it
   * acts: a key read in the last seconds is taken from memory (`credential.checked` false).
   */
  rememberedKey?: boolean;
  /**
   * The least role a signed-in person needs (session cookie). Unset: derived from the method
   * and the permission (`minimumRole`).
   */
  role?: Role;
  /**
   * The credential is optional and the handler reads it itself (a route that serves people
   * signed in or not); the document states its schemes as optional.
   */
  optional?: boolean;
  /**
   * Users and roles (decisions §14): an API key needs `manages_users` beside the permission, so
   * that a key an admin made cannot do what the admin may not.
   */
  usersManagement?: boolean;
  /**
   * A second permission an API key needs beside `permission`: account webhooks carry record
   * data, so subscribing one takes `records:read` too, or `settings` alone would read records.
   */
  alsoPermission?: Permission;
}

/**
 * The least role of a route for a session, unless the route names one: the settings API is the
 * admin's; reading (GET, or a read permission) the viewer's; writing records and notes the
 * member's; every other change the admin's. Users and roles name `owner` themselves.
 */
export function minimumRole(routeAuth: RouteAuth, method: string): Role {
  if (routeAuth.role) return routeAuth.role;
  const permission = routeAuth.permission;
  if (permission === 'settings') return 'admin';
  if (permission === 'records:read' || permission === 'documents:read') return 'viewer';
  if (SAFE_METHODS.has(method)) return 'viewer';
  if (permission === 'records:write' || permission === 'notes:write') return 'member';
  return 'admin';
}

export function roleAtLeast(role: Role, least: Role): boolean {
  return ROLES.indexOf(role) >= ROLES.indexOf(least);
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteAuth;
  }
  interface FastifyRequest {
    credential: Credential | null;
  }
}

/** The credential of an authenticated route; throws for public routes (a programming error). */
export function credentialOf(request: FastifyRequest): Exclude<Credential, { kind: 'admin' }> {
  const credential = request.credential;
  if (!credential || credential.kind === 'admin') throw new Error('route has no account credential');
  return credential;
}

export function apiKeyOf(request: FastifyRequest): Extract<Credential, { kind: 'api_key' }> {
  const credential = request.credential;
  if (credential?.kind !== 'api_key') throw new Error('route has no API key credential');
  return credential;
}

export function accountIdOf(request: FastifyRequest): string {
  return credentialOf(request).account.id;
}

type Caller = Extract<Credential, { kind: 'api_key' } | { kind: 'session' }>;

/** The API key or the signed-in person of a route that accepts both. */
export function callerOf(request: FastifyRequest): Caller {
  const credential = request.credential;
  if (credential?.kind !== 'api_key' && credential?.kind !== 'session') {
    throw new Error('route has no API key or session credential');
  }
  return credential;
}

/** Who the history names for a caller: `api:<key name>` or `user:<email>`. */
export function actorOf(caller: Caller): string {
  return caller.kind === 'api_key' ? `api:${caller.keyName}` : `user:${caller.user.email}`;
}

/** The sender name of a caller's notes: the key's name or the person's. */
export function senderNameOf(caller: Caller): string {
  return caller.kind === 'api_key' ? caller.keyName : caller.user.name;
}

/** The API key of a caller, for the statements that check a key taken from memory. */
export function keyOf(caller: Caller): Extract<Credential, { kind: 'api_key' }> | null {
  return caller.kind === 'api_key' ? caller : null;
}

/** The value of the session cookie, if the request carries one. */
export function sessionCookieOf(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  if (typeof header !== 'string' || header.length > 8192) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() !== SESSION_COOKIE) continue;
    const value = part.slice(eq + 1).trim();
    return value === '' ? undefined : value;
  }
  return undefined;
}

/** A state-changing request carried by the cookie needs the session's token (decisions §14). */
export function checkCsrf(request: FastifyRequest, credential: Extract<Credential, { kind: 'session' }>) {
  if (SAFE_METHODS.has(request.method)) return;
  const sent = request.headers['x-csrf-token'];
  if (typeof sent !== 'string' || !safeEqualStrings(sent, credential.csrfToken)) {
    throw new AppError('csrf_failed');
  }
}

/** `Authorization: Bearer <value>` or the bare value (interface: Authentication 1). */
export function bearerValue(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const trimmed = header.trim();
  const match = /^Bearer\s+(.+)$/i.exec(trimmed);
  const value = (match ? match[1] : trimmed)?.trim();
  return value ? value : undefined;
}

/** How an unknown address of the API reads a key: only to meter it (see the auth plugin). */
const UNKNOWN_ADDRESS_AUTH: RouteAuth = { accept: ['api_key'] };

export interface AuthPluginOptions {
  auth: AuthService;
  /** SHA-256 of the operator token; the token itself is not kept. */
  adminTokenHash: Buffer;
}

/**
 * Authenticates every route that declares `config.auth`: reads the credential, checks its kind,
 * and leaves the result on `request.credential`. What the credential may do is checked by
 * `authorize`, which the rate limit's hook calls once it has taken the limit, so that a request
 * over its account's limit is 429 whatever else it lacks (interface: Limits).
 */
export const authPlugin = fp<AuthPluginOptions>(
  async (app: FastifyInstance, options) => {
    app.decorateRequest('credential', null);
    // onRequest, before the body is read and validated: a request without a valid credential
    // learns nothing about the body it sent, and costs no parsing.
    app.addHook('onRequest', async (request) => {
      const routeAuth = request.routeOptions.config.auth;
      if (!routeAuth) {
        // An unknown address of the API called with a key counts against its account and
        // carries the RateLimit headers, as every answer of the API does (decisions §9); it is
        // 404 whatever the key, so a key that fails says nothing either.
        if (request.is404 && request.url.startsWith('/api/') && request.headers.authorization) {
          request.credential = await authenticate(request, UNKNOWN_ADDRESS_AUTH, options).catch(() => null);
        }
        return;
      }
      if (routeAuth.optional) return;
      request.credential = await authenticate(request, routeAuth, options);
    });
  },
  { name: 'auth' },
);

/**
 * Called by the rate limit's onRequest hook once the limit is taken: the session's CSRF token,
 * the account's module, the person's role and the key's permission. Before the body is read: a
 * forged request learns nothing about it.
 */
export function authorize(request: FastifyRequest): void {
  const routeAuth = request.routeOptions.config.auth;
  const credential = request.credential;
  if (!routeAuth || routeAuth.optional || !credential || credential.kind === 'admin') return;
  if (credential.kind === 'session') checkCsrf(request, credential);
  if (routeAuth.module && !credential.account.modules.includes(routeAuth.module)) {
    throw new AppError('module_not_enabled');
  }
  if (
    credential.kind === 'session' &&
    !roleAtLeast(credential.user.role, minimumRole(routeAuth, request.method))
  ) {
    throw new AppError('forbidden');
  }
  if (credential.kind === 'api_key' && routeAuth.permission) {
    if (!credential.permissions.includes(routeAuth.permission)) throw new AppError('forbidden');
  }
  if (
    credential.kind === 'api_key' &&
    routeAuth.alsoPermission &&
    !credential.permissions.includes(routeAuth.alsoPermission)
  ) {
    throw new AppError('forbidden');
  }
  if (credential.kind === 'api_key' && routeAuth.usersManagement && !credential.managesUsers) {
    throw new AppError('forbidden');
  }
}

async function authenticate(
  request: FastifyRequest,
  routeAuth: RouteAuth,
  options: AuthPluginOptions,
): Promise<Credential> {
  const accepts = new Set(routeAuth.accept);
  if (accepts.has('admin')) {
    const value = bearerValue(request);
    if (value && safeEqual(hashSecret(value), options.adminTokenHash)) return { kind: 'admin' };
    throw new AppError('unauthorized');
  }
  if (accepts.has('source_token')) {
    const token = (request.params as { token?: string }).token;
    const found = token ? await options.auth.findSourceToken(token) : null;
    if (found) return found;
    throw new AppError('unauthorized');
  }
  if (accepts.has('signed_url')) {
    const signed = await options.auth.findSignedDocument(request);
    if (signed) return signed;
  }
  const value = bearerValue(request);
  if (!value) {
    // Without an Authorization header, the session cookie stands in for an API key; a session
    // is looked up on every request, so that a revocation holds at once on every node.
    const cookie = accepts.has('api_key') || accepts.has('session') ? sessionCookieOf(request) : undefined;
    const session = cookie ? await options.auth.findSession(cookie) : null;
    if (session) return session;
    throw new AppError('unauthorized');
  }
  if (value.startsWith('rt_')) {
    if (!accepts.has('record_token')) throw new AppError('unauthorized');
    const found = await options.auth.findRecordToken(value);
    if (found) return found;
    throw new AppError('unauthorized');
  }
  if (!accepts.has('api_key')) throw new AppError('unauthorized');
  const found = await options.auth.findApiKey(value, { remembered: routeAuth.rememberedKey === true });
  if (found) return found;
  throw new AppError('unauthorized');
}
