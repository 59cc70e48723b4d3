import type { LookupAddress, LookupOptions } from 'node:dns';
import type { Readable } from 'node:stream';
import type { Agent } from 'undici';
import {
  type AddressPolicy,
  BlockedAddressError,
  createAddressPolicy,
  pinAddress,
  type ResolvedAddress,
  type Resolver,
  systemResolver,
} from './address-policy.ts';

/**
 * The one way the service makes HTTP requests to addresses given by users (documents now,
 * webhooks later): http and https only, every hop's address checked and the connection pinned
 * to it, redirects followed by hand and re-checked, time and size bounded.
 */

export type FetchFailure =
  | 'unsupported_scheme'
  | 'blocked_address'
  | 'too_many_redirects'
  | 'too_large'
  | 'timeout'
  | 'network_error'
  | `http_${number}`;

export class OutboundError extends Error {
  readonly reason: FetchFailure;
  constructor(reason: FetchFailure, message?: string) {
    super(message ?? reason);
    this.name = 'OutboundError';
    this.reason = reason;
  }
}

export interface GuardedFetcherOptions {
  allowPrivate: boolean;
  /** Replaces the address rule (tests allow one local server this way). */
  policy?: AddressPolicy;
  resolve?: Resolver;
  maxRedirects?: number;
  timeoutMs?: number;
  userAgent?: string;
  /**
   * Keeps connections open for reuse, per checked address, by at most this many requests at
   * once to one origin (webhooks: a new connection per message cost more than the message).
   * Every request still resolves and checks the address first and goes out only over a
   * connection to the address it checked. Without it, each request has a connection of its own.
   */
  reuseConnections?: number;
}

export interface OpenedResponse {
  url: URL;
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Readable;
  /** Aborts the transfer and releases the connection. */
  close(): Promise<void>;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

type Undici = typeof import('undici');

/**
 * undici is loaded with the first request that goes out, not with the service: it is about 5 MB
 * of heap, and a service without webhooks or document fetches never needs it.
 */
let undici: Undici | undefined;
let undiciLoading: Promise<Undici> | undefined;
function loadUndici(): Promise<Undici> {
  undiciLoading ??= import('undici').then((module) => {
    undici = module;
    return module;
  });
  return undiciLoading;
}

/** A dispatcher whose every connection goes to the one pinned address, whatever the name says. */
function pinnedAgent({ Agent }: Undici, pinned: ResolvedAddress, reuse?: { connections: number }): Agent {
  return new Agent({
    connect: {
      lookup: ((
        _hostname: string,
        options: LookupOptions,
        callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void,
      ) => {
        if (options?.all) callback(null, [{ address: pinned.address, family: pinned.family }]);
        else callback(null, pinned.address, pinned.family);
      }) as never,
    },
    // pipelining 0 closes each connection after its request.
    ...(reuse
      ? {
          connections: reuse.connections,
          pipelining: 1,
          keepAliveTimeout: 4_000,
          keepAliveMaxTimeout: 10_000,
        }
      : { connections: 1, pipelining: 0 }),
  });
}

/** Agents kept for reuse: one per checked address, the least recently used closed beyond this many. */
const MAX_REUSED_AGENTS = 64;

/** Drops a response body; the abort error it then emits is expected, not a failure. */
function discard(body: Readable): void {
  body.on('error', () => {});
  body.destroy();
}

function parseUrl(raw: string | URL): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundError('unsupported_scheme', 'not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundError('unsupported_scheme');
  if (url.username || url.password)
    throw new OutboundError('unsupported_scheme', 'credentials in URLs are not sent');
  return url;
}

function portOf(url: URL): number {
  return url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
}

export function createGuardedFetcher(options: GuardedFetcherOptions) {
  const policy = options.policy ?? createAddressPolicy(options.allowPrivate);
  const resolve = options.resolve ?? systemResolver;
  const maxRedirects = options.maxRedirects ?? 3;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const userAgent = options.userAgent ?? 'Leadline/1.0';
  const reused = new Map<string, Agent>();

  /** The agent for one checked address: kept for reuse, or one for this request alone. */
  function agentFor(
    library: Undici,
    pinned: ResolvedAddress,
  ): { agent: Agent; release: () => Promise<void> } {
    if (!options.reuseConnections) {
      const agent = pinnedAgent(library, pinned);
      return { agent, release: () => agent.destroy().catch(() => {}) };
    }
    const key = `${pinned.family}/${pinned.address}`;
    let agent = reused.get(key);
    if (agent) {
      reused.delete(key);
    } else {
      agent = pinnedAgent(library, pinned, { connections: options.reuseConnections });
      if (reused.size >= MAX_REUSED_AGENTS) {
        const [oldestKey, oldest] = reused.entries().next().value!;
        reused.delete(oldestKey);
        void oldest.close().catch(() => {});
      }
    }
    reused.set(key, agent);
    return { agent, release: async () => {} };
  }

  async function hop(
    url: URL,
    init: { method: string; headers: Record<string, string>; body?: string | Buffer },
    signal: AbortSignal,
  ) {
    let pinned: ResolvedAddress;
    try {
      pinned = await pinAddress(url.hostname, portOf(url), policy, resolve);
    } catch (error) {
      if (error instanceof BlockedAddressError) throw new OutboundError('blocked_address', error.message);
      throw new OutboundError('network_error', 'the host name could not be resolved');
    }
    const library = undici ?? (await loadUndici());
    const { agent, release } = agentFor(library, pinned);
    try {
      const response = await library.request(url, {
        dispatcher: agent,
        method: init.method as 'GET',
        headers: { 'user-agent': userAgent, ...init.headers },
        body: init.body,
        signal,
      });
      return { response, release };
    } catch (error) {
      await release();
      if (signal.aborted) throw new OutboundError('timeout');
      throw new OutboundError('network_error', (error as Error).message);
    }
  }

  return {
    /**
     * Opens a response, following at most `maxRedirects` redirects (GET only), each target
     * checked again. The caller reads `body` and must call `close()`. The whole exchange,
     * body included, is bounded by `timeoutMs`.
     */
    async open(
      target: string | URL,
      init: {
        method?: string;
        headers?: Record<string, string>;
        body?: string | Buffer;
        followRedirects?: boolean;
      } = {},
    ): Promise<OpenedResponse> {
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(new OutboundError('timeout')), timeoutMs);
      timer.unref();
      let url = parseUrl(target);
      const follow = init.followRedirects ?? true;
      try {
        for (let redirects = 0; ; redirects++) {
          const { response, release } = await hop(
            url,
            { method: init.method ?? 'GET', headers: init.headers ?? {}, body: init.body },
            controller.signal,
          );
          const location = response.headers.location;
          if (follow && REDIRECT_STATUSES.has(response.statusCode) && typeof location === 'string') {
            discard(response.body);
            await release();
            if (redirects >= maxRedirects) throw new OutboundError('too_many_redirects');
            url = parseUrl(new URL(location, url));
            continue;
          }
          const close = async () => {
            clearTimeout(timer);
            // A body read to its end leaves a reused connection open; one cut short closes it.
            if (!response.body.readableEnded) discard(response.body);
            await release();
          };
          response.body.on('close', () => clearTimeout(timer));
          return { url, status: response.statusCode, headers: response.headers, body: response.body, close };
        }
      } catch (error) {
        clearTimeout(timer);
        throw error;
      }
    },

    /** A request whose answer is read whole up to `maxResponseBytes` (webhooks). */
    async request(
      target: string,
      init: {
        method: string;
        headers?: Record<string, string>;
        body?: string | Buffer;
        maxResponseBytes?: number;
      },
    ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
      const opened = await this.open(target, { ...init, followRedirects: false });
      const limit = init.maxResponseBytes ?? 64 * 1024;
      const chunks: Buffer[] = [];
      let size = 0;
      try {
        for await (const chunk of opened.body) {
          const buffer = chunk as Buffer;
          if (size + buffer.length > limit) {
            chunks.push(buffer.subarray(0, limit - size));
            size = limit;
            break;
          }
          chunks.push(buffer);
          size += buffer.length;
        }
      } catch {
        // A cut answer still has a status; what arrived is kept.
      } finally {
        await opened.close();
      }
      return { status: opened.status, headers: opened.headers, body: Buffer.concat(chunks).toString('utf8') };
    },

    /** Closes the connections kept for reuse. */
    async close(): Promise<void> {
      const agents = [...reused.values()];
      reused.clear();
      await Promise.all(agents.map((agent) => agent.close().catch(() => {})));
    },
  };
}

export type GuardedFetcher = ReturnType<typeof createGuardedFetcher>;
