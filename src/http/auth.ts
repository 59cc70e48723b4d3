import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hashSecret, safeEqual } from '../lib/credentials.ts';
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

/** `Authorization: Bearer <value>` or the bare value (interface: Authentication 1). */
export function bearerValue(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const trimmed = header.trim();
  const match = /^Bearer\s+(.+)$/i.exec(trimmed);
  const value = (match ? match[1] : trimmed)?.trim();
  return value ? value : undefined;
}

export interface AuthPluginOptions {
  auth: AuthService;
  /** SHA-256 of the operator token; the token itself is not kept. */
  adminTokenHash: Buffer;
}

/**
 * Authenticates every route that declares `config.auth`: reads the credential, checks its kind,
 * the key's permission and the account's module, and leaves the result on `request.credential`.
 */
export const authPlugin = fp<AuthPluginOptions>(
  async (app: FastifyInstance, options) => {
    app.decorateRequest('credential', null);
    // onRequest, before the body is read and validated: a request without a valid credential
    // learns nothing about the body it sent, and costs no parsing.
    app.addHook('onRequest', async (request) => {
      const routeAuth = request.routeOptions.config.auth;
      if (!routeAuth) return;
      const credential = await authenticate(request, routeAuth, options);
      request.credential = credential;
      if (credential.kind === 'admin') return;
      if (routeAuth.module && !credential.account.modules.includes(routeAuth.module)) {
        throw new AppError('module_not_enabled');
      }
      if (credential.kind === 'api_key' && routeAuth.permission) {
        if (!credential.permissions.includes(routeAuth.permission)) throw new AppError('forbidden');
      }
    });
  },
  { name: 'auth' },
);

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
  if (!value) throw new AppError('unauthorized');
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
