import path from 'node:path';
import ipaddr from 'ipaddr.js';
import { DEFAULT_RETRY_SCHEDULE_S } from './outbound/retry-schedule.ts';
import type { S3Settings } from './storage/s3-storage.ts';

/** Settings read once at boot (decisions §2) and passed to whatever needs them. */
export interface Config {
  port: number;
  host: string;
  /** PostgreSQL connection string; undefined means the embedded database (PGlite). */
  databaseUrl: string | undefined;
  /** Pool size for PostgreSQL connections. */
  databasePoolSize: number;
  dataDir: string;
  filesDir: string;
  /**
   * Where document bytes are kept (LEADS_FILES_STORAGE, decisions §1): `directory` (filesDir,
   * the default), `database`, or `s3` (the bucket of `s3`).
   */
  filesStorage: FilesStorage;
  /** The bucket of `filesStorage: 's3'` (LEADS_S3_*); undefined with the other stores. */
  s3: S3Settings | undefined;
  /** Operator token from the environment; when absent it is generated at the first start and its hash kept in the database. */
  adminToken: string | undefined;
  /** HMAC secret from the environment; when absent it is generated at the first start and kept in the database. */
  secret: string | undefined;
  publicUrl: string;
  fetchAllowPrivate: boolean;
  redisUrl: string | undefined;
  logLevel: string;
  /** Whether this process runs the background workers next to the HTTP server. */
  runWorkers: boolean;
  /** Create the demo account on the very first start (decisions §2). */
  createDemo: boolean;
  /** Milliseconds that a graceful shutdown waits for in-flight requests. */
  shutdownTimeoutMs: number;
  /** Outbound messages (decisions §12): SMTP server, sender, retry delays, disabling of failing webhooks. */
  smtpUrl: string | undefined;
  mailFrom: string;
  /** Where email goes without an SMTP server: `$LEADS_DATA_DIR/outbox`. */
  outboxDir: string;
  retryScheduleMs: number[];
  webhookDisableAfterMs: number;
  /** Lifetime of a booking link (LEADS_BOOKING_LINK_TTL_S, 14 days). */
  bookingLinkTtlMs: number;
  /**
   * Requests a minute one client address may make to the public booking page and JSON
   * (LEADS_BOOKING_RATE_LIMIT_PER_MINUTE, 120).
   */
  bookingRateLimitPerMinute: number;
  /** Lifetime of an emailed sign-in link (LEADS_SIGNIN_LINK_TTL_S, 15 minutes). */
  signInLinkTtlMs: number;
  /**
   * How long a sender holds a claimed message before another may send it again (a sender that
   * died); unset: 60 s. Kept above the 15 s webhook timeout in production; tests shorten it.
   */
  outboundLeaseMs: number | undefined;
  /**
   * Which proxies' `X-Forwarded-For` names the client (LEADS_TRUST_PROXY, Fastify's
   * `trustProxy`): false (the connection's address), true (any), a hop count, or addresses and
   * CIDR ranges (also `loopback`, `linklocal`, `uniquelocal`).
   */
  trustProxy: TrustProxy;
}

export type TrustProxy = boolean | number | string[];

const FILES_STORAGES = ['directory', 'database', 's3'] as const;
export type FilesStorage = (typeof FILES_STORAGES)[number];

type Env = Record<string, string | undefined>;

function readInt(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function readBool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new Error(`${name} must be true or false, got "${env[name]}"`);
}

/** Seconds before each retry, comma-separated; fractions allowed (tests shorten the schedule). */
function readSchedule(env: Env, name: string, fallback: number[]): number[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback.map((seconds) => seconds * 1000);
  const values = raw.split(',').map((part) => Number(part.trim()));
  if (values.length > 50 || values.some((value) => !Number.isFinite(value) || value < 0 || value > 604_800)) {
    throw new Error(`${name} must be at most 50 comma-separated seconds from 0 to 604800, got "${raw}"`);
  }
  return values.map((seconds) => Math.round(seconds * 1000));
}

function readSmtpUrl(env: Env, name: string): string | undefined {
  const raw = nonEmpty(env[name]);
  if (raw === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') || !url.hostname) {
    throw new Error(`${name} must look like smtp://user:pass@host:port or smtps://…`);
  }
  return raw;
}

const PROXY_RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** LEADS_TRUST_PROXY: true/false, a hop count, or comma-separated addresses, ranges and range names. */
function readTrustProxy(env: Env, name: string): TrustProxy {
  const raw = nonEmpty(env[name]);
  if (raw === undefined) return false;
  const word = raw.toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(word)) return true;
  if (['0', 'false', 'no', 'off'].includes(word)) return false;
  if (/^\d+$/.test(raw)) return readInt(env, name, 0, 0, 100);
  const entries = raw.split(',').map((part) => part.trim());
  const wrong = entries.filter((entry) => !PROXY_RANGE_NAMES.has(entry) && !isAddressOrRange(entry));
  if (entries.length > 100 || wrong.length > 0) {
    throw new Error(
      `${name} must be true, false, a hop count, or at most 100 comma-separated addresses, CIDR ranges or loopback/linklocal/uniquelocal, got "${raw}"`,
    );
  }
  return entries;
}

function isAddressOrRange(entry: string): boolean {
  if (ipaddr.isValid(entry)) return true;
  try {
    ipaddr.parseCIDR(entry);
    return true;
  } catch {
    return false;
  }
}

const S3_SETTINGS = [
  'LEADS_S3_ENDPOINT',
  'LEADS_S3_BUCKET',
  'LEADS_S3_REGION',
  'LEADS_S3_ACCESS_KEY_ID',
  'LEADS_S3_SECRET_ACCESS_KEY',
  'LEADS_S3_FORCE_PATH_STYLE',
  'LEADS_S3_PREFIX',
];

/**
 * LEADS_FILES_STORAGE and the settings of its store. A setting of another store than the one
 * chosen is refused rather than ignored: the operator who gave it expects documents there.
 */
function readFilesStorage(env: Env): { filesStorage: FilesStorage; s3: S3Settings | undefined } {
  const raw = nonEmpty(env.LEADS_FILES_STORAGE)?.toLowerCase() ?? 'directory';
  const filesStorage = FILES_STORAGES.find((name) => name === raw);
  if (!filesStorage) {
    throw new Error(
      `LEADS_FILES_STORAGE must be directory, database or s3, got "${env.LEADS_FILES_STORAGE}"`,
    );
  }
  if (filesStorage !== 'directory' && nonEmpty(env.LEADS_FILES_DIR) !== undefined) {
    throw new Error(
      `LEADS_FILES_DIR is set, but LEADS_FILES_STORAGE is ${filesStorage}: documents are not kept in a directory; unset one of them`,
    );
  }
  if (filesStorage === 's3') return { filesStorage, s3: readS3(env) };
  const given = S3_SETTINGS.filter((name) => nonEmpty(env[name]) !== undefined);
  if (given.length > 0) {
    throw new Error(
      `${given.join(', ')} ${given.length === 1 ? 'is' : 'are'} set, but LEADS_FILES_STORAGE is ${filesStorage}: S3 settings apply only with LEADS_FILES_STORAGE=s3`,
    );
  }
  return { filesStorage, s3: undefined };
}

const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const REGION_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** Characters S3 calls safe in object names, in /-separated parts. */
const PREFIX_PART = /^[A-Za-z0-9!_.*'()-]+$/;

function readS3(env: Env): S3Settings {
  const bucket = nonEmpty(env.LEADS_S3_BUCKET);
  if (bucket === undefined) throw new Error('LEADS_S3_BUCKET is required with LEADS_FILES_STORAGE=s3');
  if (!BUCKET_NAME.test(bucket)) {
    throw new Error(
      `LEADS_S3_BUCKET must be a bucket name (3 to 63 lowercase letters, digits, dots and hyphens), got "${bucket}"`,
    );
  }
  const region = nonEmpty(env.LEADS_S3_REGION) ?? 'us-east-1';
  if (!REGION_NAME.test(region)) {
    throw new Error(`LEADS_S3_REGION must be a region name such as eu-west-1, got "${region}"`);
  }
  const accessKeyId = nonEmpty(env.LEADS_S3_ACCESS_KEY_ID);
  const secretAccessKey = nonEmpty(env.LEADS_S3_SECRET_ACCESS_KEY);
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    throw new Error(
      'LEADS_S3_ACCESS_KEY_ID and LEADS_S3_SECRET_ACCESS_KEY go together: set both, or neither (then the AWS_* variables, profile or instance role)',
    );
  }
  const rawPrefix = nonEmpty(env.LEADS_S3_PREFIX)?.replace(/^\/+|\/+$/g, '') ?? '';
  const parts = rawPrefix === '' ? [] : rawPrefix.split('/');
  if (
    rawPrefix.length > 200 ||
    parts.some((part) => !PREFIX_PART.test(part) || part === '.' || part === '..')
  ) {
    throw new Error(
      `LEADS_S3_PREFIX must be at most 200 letters, digits and !-_.*'() in /-separated parts, got "${env.LEADS_S3_PREFIX}"`,
    );
  }
  return {
    endpoint: readS3Endpoint(env),
    bucket,
    region,
    accessKeyId,
    secretAccessKey,
    forcePathStyle: readBool(env, 'LEADS_S3_FORCE_PATH_STYLE', false),
    prefix: rawPrefix === '' ? '' : `${rawPrefix}/`,
  };
}

function readS3Endpoint(env: Env): string | undefined {
  const raw = nonEmpty(env.LEADS_S3_ENDPOINT);
  if (raw === undefined) return undefined;
  const url = URL.parse(raw);
  if (url && (url.username || url.password)) {
    throw new Error(
      'LEADS_S3_ENDPOINT must carry no credentials: give them as LEADS_S3_ACCESS_KEY_ID and LEADS_S3_SECRET_ACCESS_KEY',
    );
  }
  if (
    !url ||
    (url.protocol !== 'https:' && url.protocol !== 'http:') ||
    !url.hostname ||
    url.search ||
    url.hash
  ) {
    throw new Error(
      `LEADS_S3_ENDPOINT must look like https://host[:port] (http:// for a server on a trusted network), got "${raw}"`,
    );
  }
  return raw.replace(/\/+$/, '');
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

export function loadConfig(env: Env = process.env): Config {
  const port = readInt(env, 'PORT', 3000, 0, 65535);
  const host = nonEmpty(env.HOST) ?? '127.0.0.1';
  const dataDir = path.resolve(nonEmpty(env.LEADS_DATA_DIR) ?? './data');
  const urlHost = host.includes(':') ? `[${host}]` : host;
  const publicUrl = (nonEmpty(env.PUBLIC_URL) ?? `http://${urlHost}:${port}`).replace(/\/+$/, '');
  return {
    port,
    host,
    databaseUrl: nonEmpty(env.DATABASE_URL),
    databasePoolSize: readInt(env, 'DATABASE_POOL_SIZE', 10, 1, 200),
    dataDir,
    filesDir: path.resolve(nonEmpty(env.LEADS_FILES_DIR) ?? path.join(dataDir, 'files')),
    ...readFilesStorage(env),
    adminToken: nonEmpty(env.LEADS_ADMIN_TOKEN),
    secret: nonEmpty(env.LEADS_SECRET),
    publicUrl,
    fetchAllowPrivate: readBool(env, 'LEADS_FETCH_ALLOW_PRIVATE', false),
    redisUrl: nonEmpty(env.REDIS_URL),
    logLevel: nonEmpty(env.LOG_LEVEL) ?? 'info',
    runWorkers: readBool(env, 'LEADS_RUN_WORKERS', true),
    createDemo: readBool(env, 'LEADS_DEMO', true),
    shutdownTimeoutMs: readInt(env, 'LEADS_SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    smtpUrl: readSmtpUrl(env, 'LEADS_SMTP_URL'),
    mailFrom: nonEmpty(env.LEADS_MAIL_FROM) ?? 'Leadline <leadline@localhost>',
    outboxDir: path.join(dataDir, 'outbox'),
    retryScheduleMs: readSchedule(env, 'LEADS_RETRY_SCHEDULE', DEFAULT_RETRY_SCHEDULE_S),
    webhookDisableAfterMs: readInt(env, 'LEADS_WEBHOOK_DISABLE_AFTER_S', 432_000, 1, 31_536_000) * 1000,
    bookingLinkTtlMs: readInt(env, 'LEADS_BOOKING_LINK_TTL_S', 1_209_600, 1, 31_536_000) * 1000,
    bookingRateLimitPerMinute: readInt(env, 'LEADS_BOOKING_RATE_LIMIT_PER_MINUTE', 120, 1, 1_000_000),
    signInLinkTtlMs: readInt(env, 'LEADS_SIGNIN_LINK_TTL_S', 900, 1, 86_400) * 1000,
    outboundLeaseMs: env.LEADS_OUTBOUND_LEASE_S
      ? readInt(env, 'LEADS_OUTBOUND_LEASE_S', 60, 1, 86_400) * 1000
      : undefined,
    trustProxy: readTrustProxy(env, 'LEADS_TRUST_PROXY'),
  };
}
