import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { buildApp } from '../../src/app.ts';
import type { TrustProxy } from '../../src/config.ts';
import type { DatabaseKind } from '../../src/db/client.ts';
import type { Db } from '../../src/db/types.ts';
import { createMemoryRateLimiter, type RateLimiter } from '../../src/http/rate-limit.ts';
import { createJobQueue, type JobQueue } from '../../src/jobs/queue.ts';
import { hashSecret } from '../../src/lib/credentials.ts';
import { createDocumentBackend } from '../../src/modules/documents/documents.backend.ts';
import type { OutboundOptions } from '../../src/outbound/outbound.service.ts';
import { createServices, type Services } from '../../src/services.ts';
import { registerJobs } from '../../src/start/worker.ts';
import { type LogLine, memoryLogger } from '../jobs/support.ts';
import { ContractChecker } from './contract.ts';
import { createTestDatabase, type TestDatabase } from './databases.ts';

export const ADMIN_TOKEN = 'adm_test_operator_token_0123456789';
export const TEST_SECRET = 'test-secret-for-hmac-signatures-0123456789';

export interface TestAccount {
  id: string;
  apiKey: string;
}

export interface Request {
  method: InjectOptions['method'];
  url: string;
  /** Sent as `Authorization: Bearer <key>`. */
  key?: string;
  headers?: Record<string, string>;
  body?: unknown;
  /** A raw payload (string or buffer) instead of JSON. */
  payload?: string | Buffer;
  /** The client address the request comes from (default 127.0.0.1). */
  remoteAddress?: string;
}

export interface TestApp {
  kind: DatabaseKind;
  app: FastifyInstance;
  db: Db;
  services: Services;
  database: TestDatabase;
  /** The started job queue (with `queue`). */
  queue?: JobQueue;
  /** What the job queue logged (with `queue`). */
  jobLog: LogLine[];
  /** Injects a request and checks the answer against the OpenAPI document. */
  request(request: Request): Promise<LightMyRequestResponse & { json<T = any>(): T }>;
  /** A new account through the operator API; each test gets its own tenant. */
  createAccount(options?: { modules?: string[]; name?: string }): Promise<TestAccount>;
  close(): Promise<void>;
}

/** The app in memory over a fresh database of the given kind. */
export interface TestAppOptions {
  /** Whether documents may be fetched from loopback (the tests' own servers); default true. */
  fetchAllowPrivate?: boolean;
  rateLimiter?: RateLimiter;
  /** Single-record creations written at once before new ones are grouped (default 4). */
  concurrentCreates?: number;
  /** Outbound engine settings (retry delays, timeouts, SMTP); webhooks may reach loopback unless `allowPrivate` is false. */
  outbound?: Partial<OutboundOptions>;
  /**
   * Start the job queue with every job registered, and work it unless `work` is false; its log
   * lines go to `TestApp.jobLog`. Off by default: most tests enqueue nothing.
   */
  queue?: { work?: boolean };
  /** The services' clock (booking slots); the real one by default. */
  now?: () => Date;
  /** Lifetime of booking links in ms (14 days by default). */
  bookingLinkTtlMs?: number;
  /** Lifetime of emailed sign-in links in ms (15 minutes by default). */
  signInLinkTtlMs?: number;
  /** The public base of links (PUBLIC_URL); http://127.0.0.1:3000 by default. */
  publicUrl?: () => string;
  /** Distribution runs: the wait for first attempts and the clock. */
  distribution?: { firstAttemptWaitMs?: number; now?: () => Date };
  /** Which proxies may name the client address (LEADS_TRUST_PROXY); none by default. */
  trustProxy?: TrustProxy;
  /** Requests a minute of one client address to the public booking surface (120 by default). */
  bookingRateLimitPerMinute?: number;
  /** The built web console to serve (console/dist by default). */
  consoleDir?: string;
  /**
   * How long the entity definitions are cached (2 s by default); a changed duplicate rule's
   * recompute starts 1 s after it.
   */
  entityCacheTtlMs?: number;
}

export async function startTestApp(kind: DatabaseKind, options: TestAppOptions = {}): Promise<TestApp> {
  const database = await createTestDatabase(kind);
  const db = database.handle.db;
  const filesDir = await mkdtemp(path.join(os.tmpdir(), 'leads-files-'));
  const jobLogger = memoryLogger();
  const queue = options.queue
    ? createJobQueue(database.handle, {
        logger: jobLogger.logger,
        pollingIntervalSeconds: 0.5,
        works: options.queue.work ?? true,
      })
    : undefined;
  const services = createServices({
    db,
    secret: TEST_SECRET,
    currentPublicUrl: options.publicUrl ?? (() => 'http://127.0.0.1:3000'),
    now: options.now,
    bookingLinkTtlMs: options.bookingLinkTtlMs,
    signInLinkTtlMs: options.signInLinkTtlMs,
    concurrentCreates: options.concurrentCreates,
    entityCacheTtlMs: options.entityCacheTtlMs,
    outbound: {
      allowPrivate: options.fetchAllowPrivate ?? true,
      outboxDir: path.join(filesDir, 'outbox'),
      ...options.outbound,
    },
    ...createDocumentBackend({
      files: { kind: 'directory', dir: filesDir },
      allowPrivate: options.fetchAllowPrivate ?? true,
    }),
    jobs: queue,
    distribution: options.distribution,
  });
  if (queue) {
    // Jobs only: tests that send messages run a dispatcher of their own, with a short poll.
    registerJobs({ queue, database: database.handle, services });
    await queue.start();
  }
  const app = await buildApp({
    services,
    adminTokenHash: hashSecret(ADMIN_TOKEN),
    rateLimiter: options.rateLimiter ?? createMemoryRateLimiter(),
    logger: false,
    trustProxy: options.trustProxy,
    bookingRateLimitPerMinute: options.bookingRateLimitPerMinute,
    consoleDir: options.consoleDir,
    checkDatabase: async () => {
      await sql`SELECT 1`.execute(db);
    },
  });
  await app.ready();
  const contract = new ContractChecker(app.swagger() as never);

  async function request(req: Request) {
    const headers: Record<string, string> = { accept: 'application/json', ...req.headers };
    if (req.key !== undefined) headers.authorization = `Bearer ${req.key}`;
    const options: InjectOptions = { method: req.method, url: req.url, headers };
    if (req.remoteAddress !== undefined) options.remoteAddress = req.remoteAddress;
    if (req.payload !== undefined) options.payload = req.payload;
    else if (req.body !== undefined) options.payload = req.body as InjectOptions['payload'];
    const response = await app.inject(options);
    contract.check(String(req.method), req.url, response);
    return response;
  }

  return {
    kind,
    app,
    db,
    services,
    database,
    queue,
    jobLog: jobLogger.lines,
    request,
    async createAccount(options = {}) {
      const response = await request({
        method: 'POST',
        url: '/admin/v1/accounts',
        key: ADMIN_TOKEN,
        body: { name: options.name ?? 'Test account', modules: options.modules ?? [] },
      });
      if (response.statusCode !== 201) throw new Error(`account creation failed: ${response.body}`);
      const body = response.json();
      return { id: body.id, apiKey: body.api_key.key };
    },
    async close() {
      await app.close();
      services.outbound.close();
      await queue?.stop(1_000);
      await database.drop();
      await rm(filesDir, { recursive: true, force: true });
    },
  };
}
