/**
 * `npm run bench`: throughput and latency of the real service (`node bin/leads.js serve`, a child
 * process) against a bare baseline (bench/baseline-server.ts, another child process), in one run
 * on the same machine, on PostgreSQL and on the embedded database. Not part of the test suite.
 * autocannon runs in this process; only 127.0.0.1 receives load.
 *
 * Env:
 *   BENCH_DB            postgres | pglite | both (both)
 *   BENCH_DURATION      seconds per scenario (10)
 *   BENCH_CONNECTIONS   concurrent connections (50)
 *   BENCH_BULK_CONNECTIONS  concurrent connections of the bulk scenarios, 100 records per call (5)
 *   BENCH_WARMUP        seconds of unmeasured load after each server start (3)
 *   BENCH_LATENCY_ROUNDS  alternating rounds of baseline.single and intake.single; single-record intake's
 *                       targets hold in every round (4; 1 measures the pair of the table only)
 *   BENCH_GROWTH=1      seed BENCH_GROWTH_ROWS records and as many idempotency keys (1,000,000 each) and
 *                       re-run intake.single, intake.idempotent and notes.by_email
 *   BENCH_GROWTH_ROUNDS  alternating rounds of each grown scenario and its empty twin (5); the verdict is
 *                       the median of their ratios
 *   BENCH_SCENARIOS     comma-separated subset of the service scenarios (all); the baselines run when
 *                       any scenario but intake.webhook does (BENCH_SCENARIOS=intake.webhook runs only
 *                       the webhook pair: plain intake and intake with a subscription, back to back)
 *   BENCH_WEBHOOK_ROUNDS  back-to-back pairs of plain intake and intake.webhook (3); the verdict is the
 *                       median ratio of their req/s
 *   BENCH_WEBHOOK_DRAIN seconds to wait after the load for the last deliveries (60), also those of
 *                       crm.stage_move, which runs on a service with its workers and a local receiver of
 *                       its automation webhooks (BENCH_SCENARIOS=crm.stage_move runs only it), and of
 *                       intake.distribution (intake with the distribution node to 3 webhook participations
 *                       on the local receiver, with its own phase; records/s, deliveries/s, receipt lag;
 *                       bench/distribution.ts)
 *   BENCH_LOG_LEVEL     the servers' LOG_LEVEL (warn); `info`, the service's default, adds its access log
 *   BENCH_PROFILE=1     run the service under `node --cpu-prof`; profiles land in bench/results/tmp/profiles
 *   BENCH_SERVICE_NODE_FLAGS  extra Node flags for the service, space-separated (e.g. `--trace-gc`)
 *   BENCH_SERVICE_OUTPUT  file that receives everything the service prints (appended)
 *   TEST_POSTGRES_URL   PostgreSQL server for the bench's own database (postgres://postgres@127.0.0.1:5432/postgres)
 *
 * Writes bench/results/latest.json and bench/results/latest.md.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { EMBEDDED_AUTOVACUUM_INTERVAL_MS } from '../src/db/autovacuum.ts';
import { onAFreePort, untilHealthy } from '../test/helpers/readiness.ts';
import { DISTRIBUTION_PARTNERS, distributionIntakeScenario, setUpDistribution } from './distribution.ts';
import { type EmbeddedFloorOptions, type FloorResult, measureBulkFloor } from './floor.ts';
import { summarizeProfile } from './profile.ts';
import {
  Bodies,
  baselineScenarios,
  CLOCK_TICKS_PER_SECOND,
  cpuPerRow,
  cpuTicksOf,
  ENTITY,
  type Measured,
  measure,
  memoryOf,
  preflight,
  type Scenario,
  type ServiceScenarioName,
  serviceScenarios,
  settle,
  settleAll,
  walKbPerRow,
  webhookIntakeScenario,
} from './scenarios.ts';
import { seedRecords } from './seed.ts';
import {
  type GrowthPair,
  type GrowthRun,
  growthVerdicts,
  type LatencyPair,
  mb,
  median,
  pct,
  pct1,
  type TargetResult,
  targetsOf,
  times,
  webhookRatio,
} from './verdicts.ts';
import type { DeliveriesAnswer, Delivery } from './webhook-receiver.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The service starts as `npm start` starts it: `node <flags> bin/leads.js serve`, with the Node
 * flags of the package's `start` script (the heap settings of docs/decisions.md).
 */
const START_NODE_FLAGS: string[] = (() => {
  const start: string = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts.start;
  // `exec` makes the shell npm starts the script in become Node (see docs/decisions.md, Process).
  const words = start.split(/\s+/).filter((word, index) => !(index === 0 && word === 'exec'));
  if (words[0] !== 'node' || !words.includes('bin/leads.js')) {
    throw new Error(`the start script is not "node … bin/leads.js serve": ${start}`);
  }
  return words.slice(1, words.indexOf('bin/leads.js'));
})();
const RESULTS = path.join(ROOT, 'bench/results');

function intSetting(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    console.error(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
    process.exit(2);
  }
  return value;
}

const DURATION = intSetting('BENCH_DURATION', 10, 1, 600);
const CONNECTIONS = intSetting('BENCH_CONNECTIONS', 50, 1, 1000);
const BULK_CONNECTIONS = intSetting('BENCH_BULK_CONNECTIONS', 5, 1, 1000);
const WARMUP = intSetting('BENCH_WARMUP', 3, 0, 60);
const LATENCY_ROUNDS = intSetting('BENCH_LATENCY_ROUNDS', 4, 1, 20);
const GROWTH = process.env.BENCH_GROWTH === '1';
const GROWTH_ROWS = intSetting('BENCH_GROWTH_ROWS', 1_000_000, 1, 50_000_000);
const GROWTH_ROUNDS = intSetting('BENCH_GROWTH_ROUNDS', 5, 1, 20);
const PROFILE = process.env.BENCH_PROFILE === '1';
const SERVICE_EXTRA_FLAGS = (process.env.BENCH_SERVICE_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean);
const SERVICE_OUTPUT = process.env.BENCH_SERVICE_OUTPUT || undefined;
type ScenarioName = ServiceScenarioName | 'intake.webhook' | 'intake.distribution';
const ALL_SCENARIOS: ScenarioName[] = [
  'intake.single',
  'intake.idempotent',
  's1.intake.form',
  'intake.bulk100',
  'records.get',
  'notes.by_email',
  'crm.stage_move',
  'intake.webhook',
  'intake.distribution',
];
const SCENARIOS = (process.env.BENCH_SCENARIOS ?? ALL_SCENARIOS.join(','))
  .split(',')
  .map((name) => name.trim())
  .filter(Boolean) as ScenarioName[];
for (const name of SCENARIOS) {
  if (!ALL_SCENARIOS.includes(name)) {
    console.error(`BENCH_SCENARIOS: unknown scenario "${name}" (known: ${ALL_SCENARIOS.join(', ')})`);
    process.exit(2);
  }
}
/**
 * Scenarios of the first phase, against the baseline; intake.webhook and crm.stage_move run in a
 * phase of their own, on a service with its workers and a local receiver of its webhooks.
 */
const BASELINE_SCENARIOS = SCENARIOS.filter(
  (name) => name !== 'intake.webhook' && name !== 'crm.stage_move' && name !== 'intake.distribution',
);
const WEBHOOK = SCENARIOS.includes('intake.webhook');
const STAGE_MOVES = SCENARIOS.includes('crm.stage_move');
const DISTRIBUTION = SCENARIOS.includes('intake.distribution');
const WEBHOOK_ROUNDS = intSetting('BENCH_WEBHOOK_ROUNDS', 3, 1, 20);
const WEBHOOK_DRAIN = intSetting('BENCH_WEBHOOK_DRAIN', 60, 1, 600);
const DB_SETTING = process.env.BENCH_DB ?? 'both';
if (!['postgres', 'pglite', 'both'].includes(DB_SETTING)) {
  console.error(`BENCH_DB must be postgres, pglite or both, got "${DB_SETTING}"`);
  process.exit(2);
}
const DATABASES = (DB_SETTING === 'both' ? ['postgres', 'pglite'] : [DB_SETTING]) as (
  | 'postgres'
  | 'pglite'
)[];
const POSTGRES_ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ADMIN_TOKEN = `adm_bench_${randomBytes(16).toString('hex')}`;
/** The service's instance secret, known here so that the distribution setup seals its webhook secrets. */
const INSTANCE_SECRET = randomBytes(32).toString('base64url');
/** The key the baseline's reads present (it keeps only its SHA-256, as the service does). */
const BASELINE_API_KEY = `bench_${randomBytes(24).toString('hex')}`;
const SETUP_RECORDS = 500;

// ---------------------------------------------------------------------------------------------
// Child processes and clean-up: every child and every temporary database or directory is
// registered, and released on success, on error, on Ctrl-C and when the watchdog fires.

const children = new Set<ChildProcess>();
const tempDirs = new Set<string>();
const cleanups: (() => Promise<void>)[] = [];

async function cleanUpAll(): Promise<void> {
  for (const child of children) await stopProcess(child, 10_000).catch(() => {});
  while (cleanups.length > 0) await cleanups.pop()!().catch((error) => console.error(`clean-up: ${error}`));
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

// Last resort when the process ends anyway: no child outlives the bench, no directory stays.
process.on('exit', () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping the servers and removing the bench's databases…`);
    void cleanUpAll().finally(() => process.exit(130));
  });
}

function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

interface Server {
  name: string;
  process: ChildProcess;
  pid: number;
  url: string;
  output(): string;
}

async function startServer(
  name: string,
  script: string[],
  env: Record<string, string>,
  nodeOptions: string[] = [],
  outputFile?: string,
): Promise<Server> {
  return onAFreePort((port) => startServerOnce(port, name, script, env, nodeOptions, outputFile));
}

async function startServerOnce(
  port: number,
  name: string,
  script: string[],
  env: Record<string, string>,
  nodeOptions: string[],
  outputFile: string | undefined,
): Promise<Server> {
  const child = spawn(process.execPath, [...nodeOptions, ...script], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
    if (outputFile) appendFileSync(outputFile, chunk);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const url = `http://127.0.0.1:${port}`;
  await untilHealthy(name, url, { child, output: () => output }, 60_000);
  return { name, process: child, pid: child.pid!, url, output: () => output };
}

/** SIGTERM (graceful stop), then SIGKILL after `timeoutMs`. */
async function stopProcess(child: ChildProcess, timeoutMs = 20_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  await exited;
  clearTimeout(timer);
}

/**
 * A new PostgreSQL database, dropped at clean-up; `backends` lists the pids of its server
 * processes, `serverProcesses` those of the whole server (autovacuum, writers, other databases).
 */
async function createDatabase(): Promise<{
  url: string;
  backends: () => Promise<number[]>;
  serverProcesses: () => Promise<number[]>;
  checkpoint: () => Promise<void>;
  walPosition: () => Promise<number>;
}> {
  const name = `leads_bench_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  cleanups.push(async () => {
    const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
    await client.connect();
    try {
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await client.end();
    }
  });
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  const monitor = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await monitor.connect();
  // Registered after the drop, so that it ends before the drop runs.
  cleanups.push(() => monitor.end());
  return {
    url: url.toString(),
    backends: async () =>
      (
        await monitor.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [name])
      ).rows.map((row) => row.pid),
    serverProcesses: async () =>
      (await monitor.query<{ pid: number }>('SELECT pid FROM pg_stat_activity')).rows.map((row) => row.pid),
    checkpoint: async () => {
      await monitor.query('CHECKPOINT');
    },
    walPosition: async () =>
      Number(
        (
          await monitor.query<{ at: string }>(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS at",
          )
        ).rows[0]!.at,
      ),
  };
}

async function api(base: string, key: string, method: string, url: string, body?: unknown): Promise<any> {
  const response = await fetch(base + url, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${text.slice(0, 500)}`);
  return text ? JSON.parse(text) : null;
}

// ---------------------------------------------------------------------------------------------
// One database kind: baseline and service side by side, the scenarios, the growth run.

/** One back-to-back pair of plain intake and intake with one webhook subscription, and its deliveries. */
interface WebhookRound {
  plain: Measured;
  subscribed: Measured;
  /** Records the measured run created (201 answers). */
  created: number;
  /** Created records whose message arrived at least once. */
  delivered: number;
  /** Deliveries of these records, repeats included. */
  deliveries: number;
  distinctWebhookIds: number;
  /** Deliveries beyond the first of a `webhook-id` (at least once allows them). */
  duplicates: number;
  /** Records with more than one distinct `webhook-id` (one subscription: should be none). */
  recordsWithSeveralMessages: number;
  missing: number;
  /** First deliveries received while the load ran, per second of load. */
  deliveriesPerSecondDuringLoad: number;
  /** First deliveries per second from the start of the load to the last one. */
  deliveriesPerSecondOverall: number;
  /** From the end of the load to the receipt of the last record's message; null if some never came. */
  drainSeconds: number | null;
  /** Receipt − the record's `created_at` from the payload (stamped before the commit): an upper bound of the lag. */
  lagFromCreated: { p50: number; p99: number; max: number };
  /** Receipt − the load generator's receipt of the 201 (after the commit): a lower bound of the lag. */
  lagFromAnswer: { p50: number; p99: number; max: number };
  signaturesVerified: number;
  signaturesInvalid: number;
  /** CPU the receiver process used during the load, per delivery it got then (it shares the machine). */
  receiverCpuMsPerDelivery: number;
}

/** What a receiver got for the answers of one load: counts, rates, drain time and lag. */
interface DeliveryStats {
  /** Answers of the load whose message is awaited. */
  expected: number;
  /** Of those, the ones whose message arrived at least once. */
  delivered: number;
  /** Deliveries of these, repeats included. */
  deliveries: number;
  distinctWebhookIds: number;
  /** Deliveries beyond the first of a `webhook-id` (at least once allows them). */
  duplicates: number;
  /** Answers with more than one distinct `webhook-id` (one message each is expected). */
  severalMessages: number;
  missing: number;
  /** First deliveries received while the load ran. */
  duringLoad: number;
  perSecondDuringLoad: number;
  perSecondOverall: number;
  drainSeconds: number | null;
  /** Receipt − the time the writing statement stamped into the payload (before its commit): an upper bound. */
  lagFromStamp: { p50: number; p99: number; max: number };
  /** Receipt − the load generator's receipt of the answer (after the commit): a lower bound. */
  lagFromAnswer: { p50: number; p99: number; max: number };
  /** The receiver's counts of sampled signatures so far (cumulative). */
  verifiedSoFar: number;
  invalidSoFar: number;
}

/**
 * Stage moves with one webhook automation on each target stage, on a service with its workers;
 * `webhooks` are the automations' deliveries, matched to their moves by record and `entered_at`
 * (its lag "from the stamp" counts from the move's `crm.entered_at`).
 */
interface StageMoveRun {
  measured: Measured;
  webhooks: DeliveryStats;
  /** 200s that moved nothing (the record was in the asked stage already): no automation runs. */
  stayed: number;
}

/** The stage moves' answers: each real move (record and entered_at → when it was read), and how many moved nothing. */
interface StageMoveAnswers {
  moved: Map<string, number>;
  stayed: number;
}

/** intake.distribution: the load, and what the receiver got of it. */
interface DistributionResult {
  measured: Measured;
  records: number;
  /** Deliveries that arrived (first of each `webhook-id`), of `records × partners`. */
  delivered: number;
  expected: number;
  deliveriesPerSecond: number;
  /** Receipt − the record's `created_at` (stamped in the transaction, before its commit), ms. */
  lag: { p50: number; p99: number; max: number };
}

interface DatabaseRun {
  database: 'postgres' | 'pglite';
  /** Null when only intake.webhook ran; `read` only when records.get ran. */
  baseline: { single: Measured; bulk: Measured; read: Measured | null } | null;
  /** The storage floor of bulk (bench/floor.ts), measured on PostgreSQL when intake.bulk100 runs. */
  bulkFloor: FloorResult | null;
  service: Measured[];
  /**
   * The table's pair first, then the extra rounds (BENCH_LATENCY_ROUNDS): single-record
   * intake's targets (req/s and p99 against the baseline's) must hold in every round.
   */
  latencyPairs: LatencyPair[];
  growth: GrowthRun | null;
  webhookRounds: WebhookRound[];
  stageMoves: StageMoveRun | null;
  distribution: DistributionResult | null;
  /** VmHWM of the service process(es): the peak resident memory over their whole life. */
  servicePeakRssBytes: number;
  /** VmRSS of the service right after the setup, before any load. */
  serviceIdleRssBytes: number;
  /** VmHWM of the service right after the setup: start-up's peak (PGlite's is large). */
  serviceStartHwmBytes: number;
  baselinePeakRssBytes: number;
  profiles: string[];
}

async function warmUp(server: Server, scenario: Scenario): Promise<void> {
  if (WARMUP === 0) return;
  const next = scenario.request.next;
  const run = autocannon({
    url: server.url,
    connections: CONNECTIONS,
    duration: WARMUP,
    timeout: 30,
    maxOverallRequests: 1_000_000,
    requests: [
      {
        method: scenario.request.method,
        path: scenario.request.path,
        headers: scenario.request.headers,
        setupRequest: (request) => ({ ...request, ...next() }),
      },
    ],
  });
  const guard = setTimeout(() => (run as unknown as { stop(): void }).stop(), (WARMUP + 45) * 1000);
  try {
    await run;
  } finally {
    clearTimeout(guard);
  }
  await settle(server.pid);
}

// ---------------------------------------------------------------------------------------------
// Webhook pair: plain intake and intake with one account webhook subscribed to record.created,
// back to back on one service process with its workers, and the deliveries a local receiver saw.

async function receiverDeliveries(receiver: Server): Promise<DeliveriesAnswer> {
  const response = await fetch(`${receiver.url}/deliveries`, { signal: AbortSignal.timeout(30_000) });
  if (!response.ok) throw new Error(`receiver: ${response.status}`);
  return (await response.json()) as DeliveriesAnswer;
}

/** Waits until the receiver got nothing for `quietMs` (messages of a warm-up), at most the drain time. */
async function waitForQuiet(receiver: Server, quietMs = 2_000): Promise<void> {
  const deadline = Date.now() + WEBHOOK_DRAIN * 1000;
  let quietSince = Date.now();
  while (Date.now() < deadline && Date.now() - quietSince < quietMs) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    if ((await receiverDeliveries(receiver)).deliveries.length > 0) quietSince = Date.now();
  }
}

/** Nearest-rank p50, p99 and the maximum, rounded to ms. */
function spread(values: number[]): { p50: number; p99: number; max: number } {
  if (values.length === 0) return { p50: Number.NaN, p99: Number.NaN, max: Number.NaN };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) =>
    Math.round(sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!);
  return { p50: at(0.5), p99: at(0.99), max: Math.round(sorted[sorted.length - 1]!) };
}

/**
 * Reads the receiver until every answer of the load (`answered`: key → when the load generator
 * read it) has its message, or the drain time ran out; `keyOf` names the answer a delivery belongs
 * to, `stampOf` the time the writing statement put into its payload.
 */
async function collectDeliveries(
  receiver: Server,
  answered: Map<string, number>,
  keyOf: (delivery: Delivery) => string | null,
  stampOf: (delivery: Delivery) => number,
  loadStart: number,
  loadEnd: number,
): Promise<DeliveryStats> {
  const received: { key: string; delivery: Delivery }[] = [];
  const first = new Map<string, Delivery>();
  const deadline = loadEnd + WEBHOOK_DRAIN * 1000;
  let answer: DeliveriesAnswer;
  for (;;) {
    answer = await receiverDeliveries(receiver);
    for (const delivery of answer.deliveries) {
      const key = keyOf(delivery);
      if (key === null || !answered.has(key)) continue;
      received.push({ key, delivery });
      const earlier = first.get(key);
      if (!earlier || delivery.receivedAt < earlier.receivedAt) first.set(key, delivery);
    }
    if (first.size >= answered.size || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const idsByKey = new Map<string, Set<string>>();
  for (const { key, delivery } of received) {
    const ids = idsByKey.get(key) ?? new Set<string>();
    ids.add(delivery.webhookId);
    idsByKey.set(key, ids);
  }
  const distinctWebhookIds = new Set(received.map(({ delivery }) => delivery.webhookId)).size;
  const firsts = [...first.entries()];
  const lastReceipt = Math.max(loadStart, ...firsts.map(([, delivery]) => delivery.receivedAt));
  const duringLoad = firsts.filter(([, delivery]) => delivery.receivedAt <= loadEnd).length;
  return {
    expected: answered.size,
    delivered: first.size,
    deliveries: received.length,
    distinctWebhookIds,
    duplicates: received.length - distinctWebhookIds,
    severalMessages: [...idsByKey.values()].filter((ids) => ids.size > 1).length,
    missing: answered.size - first.size,
    duringLoad,
    perSecondDuringLoad: Math.round(duringLoad / ((loadEnd - loadStart) / 1000)),
    perSecondOverall: Math.round(first.size / Math.max(0.001, (lastReceipt - loadStart) / 1000)),
    drainSeconds:
      first.size === answered.size ? Math.round(Math.max(0, lastReceipt - loadEnd) / 100) / 10 : null,
    lagFromStamp: spread(firsts.map(([, delivery]) => delivery.receivedAt - stampOf(delivery))),
    lagFromAnswer: spread(firsts.map(([key, delivery]) => delivery.receivedAt - answered.get(key)!)),
    verifiedSoFar: answer.verified,
    invalidSoFar: answer.invalid,
  };
}

/** The key of a move: its record and the time it entered the stage (as ms, whatever the spelling). */
function moveKey(recordId: string, enteredAt: string | number): string {
  return `${recordId}|${typeof enteredAt === 'number' ? enteredAt : Date.parse(enteredAt)}`;
}

/**
 * Stage moves on a service with its workers: one webhook automation on each stage the moves enter,
 * pointing at the receiver, so that every move's automation is sent while the moves go on.
 */
async function benchStageMoves(
  service: Server,
  receiver: Server,
  scenario: Scenario,
  apiKey: string,
  answers: StageMoveAnswers,
  databasePids: (() => Promise<number[]>) | undefined,
): Promise<StageMoveRun> {
  for (const stage of ['Won', 'Contacted']) {
    const automation = await api(service.url, apiKey, 'POST', '/api/v1/settings/automations', {
      name: `Bench hook ${stage}`,
      entity: 'lead',
      stage,
      action: { type: 'webhook', url: `${receiver.url}/hook` },
    });
    await fetch(`${receiver.url}/secret`, {
      method: 'POST',
      body: automation.secret,
      signal: AbortSignal.timeout(5_000),
    });
  }
  await warmUp(service, scenario);
  await waitForQuiet(receiver);
  // A late automation webhook of the preflight matches no move of the load (its key is not kept).
  const { measured, loadStart, loadEnd } = await loadWithReceiver(
    service,
    receiver,
    scenario,
    databasePids,
    () => {
      answers.moved.clear();
      answers.stayed = 0;
    },
  );
  const answered = new Map(answers.moved);
  const { stayed } = answers;
  const stats = await collectDeliveries(
    receiver,
    answered,
    (delivery) => (delivery.recordId ? moveKey(delivery.recordId, delivery.enteredAt) : null),
    (delivery) => delivery.enteredAt,
    loadStart,
    loadEnd,
  );
  const result: StageMoveRun = { measured, webhooks: stats, stayed };
  console.log(
    `  stage moves: ${measured.requestsPerSecond} moves/s, p99 ${measured.p99} ms; ${stats.delivered}/${stats.expected} automation webhooks ` +
      `(${stats.duplicates} duplicates, ${stats.missing} missing; ${stayed} answers moved nothing), ${stats.perSecondDuringLoad}/s during the moves, ` +
      `drain ${stats.drainSeconds ?? `> ${WEBHOOK_DRAIN}`} s, lag p50/p99 ${stats.lagFromStamp.p50}/${stats.lagFromStamp.p99} ms from entered_at, ` +
      `${stats.lagFromAnswer.p50}/${stats.lagFromAnswer.p99} ms from the answer; signatures ${stats.verifiedSoFar} verified, ${stats.invalidSoFar} invalid`,
  );
  return result;
}

/**
 * One measured load whose messages a receiver gets: what arrived before (the preflight's message
 * among it) is taken from the receiver first, and `reset` forgets the answers seen so far.
 */
async function loadWithReceiver(
  service: Server,
  receiver: Server,
  scenario: Scenario,
  databasePids: (() => Promise<number[]>) | undefined,
  reset: () => void,
) {
  await settle(service.pid);
  await preflight(service.url, scenario);
  await receiverDeliveries(receiver);
  reset();
  const receiverTicks = cpuTicksOf(receiver.pid);
  const loadStart = Date.now();
  const measured = await measure(service.url, scenario, {
    duration: DURATION,
    connections: CONNECTIONS,
    pid: service.pid,
    databasePids,
  });
  return {
    measured,
    loadStart,
    loadEnd: Date.now(),
    receiverTicks: cpuTicksOf(receiver.pid) - receiverTicks,
  };
}

async function benchWebhooks(
  service: Server,
  receiver: Server,
  plain: Scenario,
  setUpAccount: (server: Server, name: string) => Promise<{ id: string; apiKey: string }>,
  bodies: Bodies,
  databasePids: (() => Promise<number[]>) | undefined,
): Promise<WebhookRound[]> {
  const account = await setUpAccount(service, 'Bench webhooks');
  const hook = await api(service.url, account.apiKey, 'POST', '/api/v1/settings/webhooks', {
    url: `${receiver.url}/hook`,
    events: ['record.created'],
  });
  await fetch(`${receiver.url}/secret`, {
    method: 'POST',
    body: hook.secret,
    signal: AbortSignal.timeout(5_000),
  });
  console.log(`  webhook pair: account ${account.id}, webhook ${hook.id} → ${receiver.url}/hook`);
  let created = new Map<string, number>();
  const subscribed = webhookIntakeScenario(bodies, account.apiKey, (id, answeredAt) =>
    created.set(id, answeredAt),
  );
  await warmUp(service, plain);
  await warmUp(service, subscribed);
  await waitForQuiet(receiver);

  const load = (scenario: Scenario) =>
    loadWithReceiver(service, receiver, scenario, databasePids, () => {
      created = new Map();
    });

  const rounds: WebhookRound[] = [];
  let verifiedSoFar = 0;
  let invalidSoFar = 0;
  for (let round = 1; round <= WEBHOOK_ROUNDS; round++) {
    const named = (scenario: Scenario, name: string) => ({
      ...scenario,
      name: round === 1 ? name : `${name} (round ${round})`,
    });
    const plainRun = await load(named(plain, 'intake.single (workers on)'));
    const { measured, loadStart, loadEnd, receiverTicks } = await load(named(subscribed, 'intake.webhook'));
    const answered = created;

    const stats = await collectDeliveries(
      receiver,
      answered,
      (delivery) => delivery.recordId,
      (delivery) => delivery.createdAt,
      loadStart,
      loadEnd,
    );
    const result: WebhookRound = {
      plain: plainRun.measured,
      subscribed: measured,
      created: stats.expected,
      delivered: stats.delivered,
      deliveries: stats.deliveries,
      distinctWebhookIds: stats.distinctWebhookIds,
      duplicates: stats.duplicates,
      recordsWithSeveralMessages: stats.severalMessages,
      missing: stats.missing,
      deliveriesPerSecondDuringLoad: stats.perSecondDuringLoad,
      deliveriesPerSecondOverall: stats.perSecondOverall,
      drainSeconds: stats.drainSeconds,
      lagFromCreated: stats.lagFromStamp,
      lagFromAnswer: stats.lagFromAnswer,
      receiverCpuMsPerDelivery:
        Math.round(((receiverTicks * 1000) / CLOCK_TICKS_PER_SECOND / Math.max(1, stats.duringLoad)) * 1000) /
        1000,
      signaturesVerified: stats.verifiedSoFar - verifiedSoFar,
      signaturesInvalid: stats.invalidSoFar - invalidSoFar,
    };
    verifiedSoFar = stats.verifiedSoFar;
    invalidSoFar = stats.invalidSoFar;
    rounds.push(result);
    console.log(
      `    round ${round}: ${pct1(measured.requestsPerSecond / plainRun.measured.requestsPerSecond)} of plain intake; ` +
        `${result.delivered}/${result.created} delivered (${result.duplicates} duplicates, ${result.missing} missing), ` +
        `${result.deliveriesPerSecondDuringLoad}/s during the load, drain ${result.drainSeconds ?? `> ${WEBHOOK_DRAIN}`} s, ` +
        `lag p50/p99 ${result.lagFromCreated.p50}/${result.lagFromCreated.p99} ms from created_at, ` +
        `${result.lagFromAnswer.p50}/${result.lagFromAnswer.p99} ms from the answer; ` +
        `signatures ${result.signaturesVerified} verified, ${result.signaturesInvalid} invalid; receiver ${result.receiverCpuMsPerDelivery} ms CPU per delivery`,
    );
  }
  return rounds;
}

async function benchDistribution(
  service: Server,
  receiver: Server,
  apiKey: string,
  bodies: Bodies,
  databasePids: (() => Promise<number[]>) | undefined,
): Promise<DistributionResult> {
  let created = new Map<string, number>();
  const scenario = distributionIntakeScenario(bodies, apiKey, (id, at) => created.set(id, at));
  await warmUp(service, scenario);
  await waitForQuiet(receiver);
  const { measured, loadStart, loadEnd } = await loadWithReceiver(
    service,
    receiver,
    scenario,
    databasePids,
    () => {
      created = new Map();
    },
  );
  const first = new Map<string, Delivery>();
  const expected = created.size * DISTRIBUTION_PARTNERS;
  const deadline = loadEnd + WEBHOOK_DRAIN * 1000;
  for (;;) {
    for (const delivery of (await receiverDeliveries(receiver)).deliveries) {
      if (!delivery.recordId || !created.has(delivery.recordId)) continue;
      const earlier = first.get(delivery.webhookId);
      if (!earlier || delivery.receivedAt < earlier.receivedAt) first.set(delivery.webhookId, delivery);
    }
    if (first.size >= expected || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const firsts = [...first.values()];
  const lastReceipt = Math.max(loadEnd, ...firsts.map((delivery) => delivery.receivedAt));
  const result: DistributionResult = {
    measured,
    records: created.size,
    delivered: first.size,
    expected,
    deliveriesPerSecond: Math.round(first.size / Math.max(0.001, (lastReceipt - loadStart) / 1000)),
    lag: spread(firsts.map((delivery) => delivery.receivedAt - delivery.createdAt)),
  };
  console.log(
    `    intake.distribution: ${measured.requestsPerSecond} records/s, ${result.deliveriesPerSecond} deliveries/s, ` +
      `${result.delivered}/${result.expected} delivered, lag p50/p99 ${result.lag.p50}/${result.lag.p99} ms`,
  );
  return result;
}

function logFloor(floor: FloorResult): void {
  console.log(
    `  floor.bulk100 (no server)   ${String(floor.callsPerSecond).padStart(6)} calls/s ${String(floor.rowsPerSecond).padStart(7)} rows/s  p50 ${floor.p50} ms  p99 ${floor.p99} ms  database cpu/row ${floor.databaseCpuMsPerRow}`,
  );
}

/**
 * The embedded database's bulk floor (bench/floor.ts) in a child process run with the start
 * script's Node flags, so that PGlite runs as it runs in the service; the service must be stopped.
 */
async function measureEmbeddedBulkFloor(options: EmbeddedFloorOptions): Promise<FloorResult> {
  const child = spawn(process.execPath, [...START_NODE_FLAGS, 'bench/floor.ts', JSON.stringify(options)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let output = '';
  let errors = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    errors = (errors + chunk.toString()).slice(-5_000);
  });
  const guard = setTimeout(() => child.kill('SIGKILL'), (options.seconds + 120) * 1000);
  try {
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    if (code !== 0) throw new Error(`the embedded floor failed (exit ${code}):\n${errors}`);
  } finally {
    clearTimeout(guard);
    children.delete(child);
  }
  const lines = output.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]!) as FloorResult;
}

async function benchDatabase(kind: 'postgres' | 'pglite'): Promise<DatabaseRun> {
  console.log(`\n== ${kind} ==`);
  const runId = `${kind.slice(0, 2)}${randomBytes(3).toString('hex')}`;
  const bodies = new Bodies(runId);
  const serviceDir = tempDir('leads-bench-service-');
  const serviceEnv: Record<string, string> = {
    LEADS_ADMIN_TOKEN: ADMIN_TOKEN,
    LEADS_DEMO: 'false',
    LEADS_RUN_WORKERS: 'false',
    LEADS_SECRET: INSTANCE_SECRET,
    // On PostgreSQL only the documents directory lives here; the bench sends no documents.
    LEADS_DATA_DIR: serviceDir,
  };
  const baselineEnv: Record<string, string> = { BASELINE_API_KEY };
  let databasePids: (() => Promise<number[]>) | undefined;
  let checkpoint: (() => Promise<void>) | undefined;
  let walPosition: (() => Promise<number>) | undefined;
  /**
   * PostgreSQL goes on after a run: autovacuum of the tables it wrote, the writers. Each run (and
   * bulk's floor) waits until the whole server is idle, so that one run's aftermath does not fall
   * into the next; a wait of more than 2 s is logged.
   */
  let databaseIdle: (() => Promise<void>) | undefined;
  if (kind === 'postgres') {
    const database = await createDatabase();
    databaseIdle = async () => {
      const started = Date.now();
      await settleAll(database.serverProcesses, 60_000, 1_000);
      const waited = Date.now() - started;
      if (waited > 2_000) console.log(`  (waited ${(waited / 1000).toFixed(1)} s for PostgreSQL to be idle)`);
    };
    walPosition = database.walPosition;
    serviceEnv.DATABASE_URL = database.url;
    baselineEnv.DATABASE_URL = database.url;
    databasePids = database.backends;
    checkpoint = database.checkpoint;
  } else {
    serviceEnv.DATABASE_URL = '';
    baselineEnv.DATABASE_URL = '';
    baselineEnv.LEADS_DATA_DIR = tempDir('leads-bench-baseline-');
  }
  const profileDir = path.join(RESULTS, 'tmp/profiles');
  const profiles: string[] = [];
  const serviceNodeOptions = (phase: string) => {
    const flags = [...START_NODE_FLAGS, ...SERVICE_EXTRA_FLAGS];
    if (!PROFILE) return flags;
    mkdirSync(profileDir, { recursive: true });
    const name = `service-${kind}-${phase}-${Date.now()}.cpuprofile`;
    profiles.push(path.join(profileDir, name));
    return [...flags, '--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}`];
  };
  /**
   * `workers`: the service sends outbound messages itself, as `serve` does by default; the
   * baseline's comparison runs without them (LEADS_RUN_WORKERS=false), the webhook pair with.
   */
  const startService = (phase: string, workers = false, env = serviceEnv) =>
    startServer(
      `service (${kind}${workers ? ', workers' : ''}${env === serviceEnv ? '' : `, ${phase}`})`,
      ['bin/leads.js', 'serve'],
      workers ? { ...env, LEADS_RUN_WORKERS: 'true', LEADS_FETCH_ALLOW_PRIVATE: 'true' } : env,
      serviceNodeOptions(phase),
      SERVICE_OUTPUT,
    );
  /**
   * A first start and stop on `env`'s database: it fills Node's compile cache (bin/leads.js) and,
   * on the embedded database, runs initdb (a peak of its own), as the first start after an
   * install does; the measured process is then a restart, as a running installation's is.
   */
  const primeService = async (env: Record<string, string>) => {
    const priming = await startServer(`service (${kind}, priming)`, ['bin/leads.js', 'serve'], env, [
      ...START_NODE_FLAGS,
    ]);
    await stopProcess(priming.process);
  };

  let baseline: Server | undefined;
  let service: Server | undefined;
  let receiver: Server | undefined;
  let movesReceiver: Server | undefined;
  let servicePeak = 0;
  let twin: Server | undefined;
  /**
   * `quietFirst`: other server processes of the bench that must be idle before this one is
   * measured. The rounds alternate the baseline and the service, the growth runs two services,
   * and the one measured last went on working after its run (requests autocannon left, and on
   * the embedded database an ANALYZE of the tables the run wrote, which its maintenance starts
   * within 5 s, or, on a table of 100,000 rows or more, at its first quiet look, up to two
   * intervals after the run): that work took CPU from the next run of the other. They are watched
   * over a window longer than two maintenance intervals.
   */
  const quiet = (other: Server) => settle(other.pid, 60_000, 2 * EMBEDDED_AUTOVACUUM_INTERVAL_MS + 500);
  const run = async (
    server: Server,
    scenario: Scenario,
    pids = databasePids,
    quietFirst: Server[] = [],
  ): Promise<Measured> => {
    for (const other of quietFirst) await quiet(other);
    await settle(server.pid);
    await databaseIdle?.();
    await preflight(server.url, scenario);
    return measure(server.url, scenario, {
      duration: DURATION,
      connections: CONNECTIONS,
      pid: server.pid,
      databasePids: pids,
      walPosition,
    });
  };
  /** An account with the bench entity, through the public API as an integration would make it. */
  const setUpAccount = async (server: Server, name: string, modules = ['crm']) => {
    const account = await api(server.url, ADMIN_TOKEN, 'POST', '/admin/v1/accounts', {
      name,
      modules,
      rate_limit_per_minute: 1_000_000,
    });
    const apiKey: string = account.api_key.key;
    await api(server.url, apiKey, 'PUT', '/api/v1/settings/entities/lead', ENTITY);
    return { id: account.id as string, apiKey };
  };
  /** The setup records (records.get reads them, notes.by_email finds them by email). */
  const setUpRecords = async (server: Server, apiKey: string) => {
    const ids: string[] = [];
    const emails: string[] = [];
    for (let made = 0; made < SETUP_RECORDS; made += 100) {
      const records = Array.from({ length: 100 }, () => ({ entity: 'lead', fields: bodies.fields(false) }));
      const answer = await api(server.url, apiKey, 'POST', '/api/v1/records/bulk', { records });
      if (answer.accepted !== 100) throw new Error(`setup: bulk accepted ${answer.accepted} of 100`);
      ids.push(...answer.results.map((result: { id: string }) => result.id));
      emails.push(...records.map((record) => record.fields.email as string));
    }
    return { ids, emails };
  };
  try {
    if (BASELINE_SCENARIOS.length > 0) {
      baseline = await startServer(`baseline (${kind})`, ['bench/baseline-server.ts'], baselineEnv);
    }
    await primeService(serviceEnv);
    service = await startService('empty', BASELINE_SCENARIOS.length === 0);

    const account = await setUpAccount(service, 'Bench');
    const apiKey = account.apiKey;
    const { ids, emails } = await setUpRecords(service, apiKey);
    const { rss: serviceIdle, hwm: serviceStartHwm } = memoryOf(service.pid);
    console.log(
      `  setup: account ${account.id}, entity lead, ${ids.length} records; service RSS ${mb(serviceIdle)} MB before load (peak so far ${mb(serviceStartHwm)} MB)`,
    );

    /** Each stage move's answer (record and entered_at) → when the load generator read it. */
    const moveAnswers: StageMoveAnswers = { moved: new Map(), stayed: 0 };
    const scenarios = serviceScenarios(bodies, {
      apiKey,
      ids,
      emails,
      bulkConnections: BULK_CONNECTIONS,
      onMoved: (recordId, enteredAt, answeredAt) =>
        moveAnswers.moved.set(moveKey(recordId, enteredAt), answeredAt),
      onStayed: () => {
        moveAnswers.stayed++;
      },
    });
    /** Rows of the baseline's own table, for its reads (made only when records.get runs). */
    const baselineIds: string[] = [];
    if (baseline && SCENARIOS.includes('records.get')) {
      for (let made = 0; made < SETUP_RECORDS; made += 100) {
        const answer = await api(baseline.url, '', 'POST', '/records/bulk', {
          records: Array.from({ length: 100 }, () => ({ entity: 'lead', fields: bodies.fields(false) })),
        });
        baselineIds.push(...answer.results.map((result: { id: string }) => result.id));
      }
    }
    let baselineRun: DatabaseRun['baseline'] = null;
    let bulkFloor: FloorResult | null = null;
    const results: Measured[] = [];
    const latencyPairs: LatencyPair[] = [];
    let growth: GrowthRun | null = null;
    if (baseline) {
      const base = baselineScenarios(bodies, BULK_CONNECTIONS, {
        apiKey: BASELINE_API_KEY,
        ids: baselineIds,
      });
      // The growth runs start right after the seed's checkpoint (seed.ts); the empty runs start
      // right after one too, so that both begin at the same point of PostgreSQL's checkpoint cycle.
      await checkpoint?.();
      await warmUp(baseline, base.single);
      await warmUp(service, scenarios['intake.single']);
      // Baseline and service alternate: as in the growth runs, the one measured before must be
      // idle first (requests autocannon left, the embedded database's maintenance after a run).
      const bare = baseline;
      const runBaseline = (scenario: Scenario) => run(bare, scenario, databasePids, service ? [service] : []);
      const runService = (scenario: Scenario) => run(service!, scenario, databasePids, [bare]);

      // Each service scenario right after its baseline, so that both see the same machine load.
      const baseSingle = await runBaseline(base.single);
      for (const name of ['intake.single', 'intake.idempotent', 's1.intake.form'] as const) {
        if (!SCENARIOS.includes(name)) continue;
        const measured = await runService(scenarios[name]);
        results.push(measured);
        if (name !== 'intake.single') continue;
        latencyPairs.push(pairOf(baseSingle, measured));
        for (let round = 2; round <= LATENCY_ROUNDS; round++) {
          const again = (scenario: Scenario) => ({ ...scenario, name: `${scenario.name} (round ${round})` });
          const baselineAgain = await runBaseline(again(base.single));
          const serviceAgain = await runService(again(scenarios['intake.single']));
          latencyPairs.push(pairOf(baselineAgain, serviceAgain));
        }
      }
      const baseBulk = await runBaseline(base.bulk);
      // The storage floor of bulk, right between the multi-row baseline and the service's bulk:
      // the rows the service writes for those calls, by a client with no server in between.
      if (kind === 'postgres' && SCENARIOS.includes('intake.bulk100')) {
        await quiet(bare);
        await settle(service.pid);
        await databaseIdle?.();
        bulkFloor = await measureBulkFloor({
          databaseUrl: serviceEnv.DATABASE_URL!,
          accountId: account.id,
          entityKey: 'lead',
          connections: BULK_CONNECTIONS,
          seconds: DURATION,
          tag: runId,
          cpuTicksOf,
          ticksPerSecond: CLOCK_TICKS_PER_SECOND,
        });
        logFloor(bulkFloor);
      }
      let baseRead: Measured | null = null;
      for (const name of ['intake.bulk100', 'records.get', 'notes.by_email'] as const) {
        if (!SCENARIOS.includes(name)) continue;
        // The bare read right before the service's, so that both see the same machine load.
        if (name === 'records.get') baseRead = await runBaseline(base.read);
        results.push(await runService(scenarios[name]));
        // The embedded database admits one process: its floor runs right after bulk with the
        // service stopped, in a process of its own; the service then starts again, warmed up.
        if (name === 'intake.bulk100' && kind === 'pglite') {
          servicePeak = Math.max(servicePeak, memoryOf(service.pid).hwm);
          await stopProcess(service.process);
          service = undefined;
          bulkFloor = await measureEmbeddedBulkFloor({
            dataDir: serviceDir,
            accountId: account.id,
            entityKey: 'lead',
            seconds: DURATION,
            tag: runId,
          });
          logFloor(bulkFloor);
          service = await startService('after-floor');
          for (const next of ['records.get', 'notes.by_email'] as const) {
            if (SCENARIOS.includes(next)) await warmUp(service, scenarios[next]);
          }
        }
      }
      baselineRun = { single: baseSingle, bulk: baseBulk, read: baseRead };
    }
    servicePeak = Math.max(servicePeak, memoryOf(service.pid).hwm);

    let webhookRounds: WebhookRound[] = [];
    let stageMoves: StageMoveRun | null = null;
    if (WEBHOOK || STAGE_MOVES) {
      if (baseline) {
        // These phases need the workers (they send); the runs above were measured without.
        await stopProcess(service.process);
        service = undefined;
        service = await startService('workers', true);
      }
      if (STAGE_MOVES) {
        // A receiver of its own, so that its deliveries and signature counts are the moves' alone.
        movesReceiver = await startServer(`automation receiver (${kind})`, ['bench/webhook-receiver.ts'], {});
        stageMoves = await benchStageMoves(
          service,
          movesReceiver,
          scenarios['crm.stage_move'],
          apiKey,
          moveAnswers,
          databasePids,
        );
        await stopProcess(movesReceiver.process);
        movesReceiver = undefined;
        servicePeak = Math.max(servicePeak, memoryOf(service.pid).hwm);
      }
      if (WEBHOOK) {
        receiver = await startServer(`webhook receiver (${kind})`, ['bench/webhook-receiver.ts'], {});
        webhookRounds = await benchWebhooks(
          service,
          receiver,
          scenarios['intake.single'],
          setUpAccount,
          bodies,
          databasePids,
        );
        servicePeak = Math.max(servicePeak, memoryOf(service.pid).hwm);
      }
    }

    let distribution: DistributionResult | null = null;
    if (DISTRIBUTION) {
      const distributed = await setUpAccount(service, 'Bench distribution', ['distribution']);
      // The setup is written with the service stopped (the embedded database admits one process).
      await stopProcess(service.process);
      service = undefined;
      receiver ??= await startServer(`webhook receiver (${kind})`, ['bench/webhook-receiver.ts'], {});
      const secrets = await setUpDistribution({
        databaseUrl: serviceEnv.DATABASE_URL || undefined,
        dataDir: serviceDir,
        secret: INSTANCE_SECRET,
        accountId: distributed.id,
        entityKey: 'lead',
        receiverUrl: receiver.url,
      });
      for (const { path: hookPath, secret } of secrets) {
        await fetch(`${receiver.url}/secret?path=${encodeURIComponent(hookPath)}`, {
          method: 'POST',
          body: secret,
          signal: AbortSignal.timeout(5_000),
        });
      }
      service = await startService('distribution', true);
      distribution = await benchDistribution(service, receiver, distributed.apiKey, bodies, databasePids);
      servicePeak = Math.max(servicePeak, memoryOf(service.pid).hwm);
    }

    if (GROWTH && baseline) {
      // The empty run's twin: the same service on a database of its own with the setup alone,
      // measured in turns with the grown service in the same minutes, so that a change of the
      // machine's own speed (the first phase's empty runs are half an hour earlier) falls on both.
      const twinEnv: Record<string, string> = { ...serviceEnv, LEADS_DATA_DIR: tempDir('leads-bench-twin-') };
      let twinPids = databasePids;
      if (kind === 'postgres') {
        const twinDatabase = await createDatabase();
        twinEnv.DATABASE_URL = twinDatabase.url;
        twinPids = twinDatabase.backends;
      }
      await primeService(twinEnv);
      twin = await startService('twin', false, twinEnv);
      const twinAccount = await setUpAccount(twin, 'Bench twin');
      const twinScenarios = serviceScenarios(bodies, {
        apiKey: twinAccount.apiKey,
        ...(await setUpRecords(twin, twinAccount.apiKey)),
        bulkConnections: BULK_CONNECTIONS,
        onMoved: () => {},
      });
      // The embedded database admits one process: the service stops while the seed writes.
      // It restarts on PostgreSQL too, so that both runs compare a fresh, warmed-up process.
      await stopProcess(service.process);
      service = undefined;
      console.log(`  seeding ${GROWTH_ROWS.toLocaleString('en')} records…`);
      const seeded = await seedRecords(
        {
          databaseUrl: serviceEnv.DATABASE_URL || undefined,
          dataDir: serviceDir,
          accountId: account.id,
          entityKey: 'lead',
          rows: GROWTH_ROWS,
          tag: runId,
        },
        (line) => console.log(line),
      );
      console.log(`  seeded in ${seeded.seconds} s`);
      service = await startService('grown');
      await warmUp(service, scenarios['intake.single']);
      await warmUp(twin, twinScenarios['intake.single']);
      // Both databases' rounds begin right after a checkpoint, as the first phase's did.
      await checkpoint?.();
      const baselineAgain = await run(baseline, {
        ...baselineScenarios(bodies, BULK_CONNECTIONS).single,
        name: 'baseline.single',
      });
      const pairs: GrowthPair[] = [];
      for (const name of ['intake.single', 'intake.idempotent', 'notes.by_email'] as const) {
        if (!SCENARIOS.includes(name)) continue;
        // Each scenario warmed up on both first: the grown service restarted on a data set larger
        // than the database's buffers, and a scenario's first seconds read its pages in.
        if (name !== 'intake.single') {
          await warmUp(service, scenarios[name]);
          await warmUp(twin, twinScenarios[name]);
        }
        for (let round = 1; round <= GROWTH_ROUNDS; round++) {
          const suffix = round === 1 ? '' : `, round ${round}`;
          const measureEmpty = () =>
            run(twin!, { ...twinScenarios[name], name: `${name} (empty twin${suffix})` }, twinPids, [
              service!,
            ]);
          const measureGrown = () =>
            run(service!, { ...scenarios[name], name: `${name} (grown${suffix})` }, databasePids, [twin!]);
          // Which goes first alternates, so that neither always meets the other's leftovers.
          if (round % 2 === 1) {
            const empty = await measureEmpty();
            pairs.push({ scenario: name, empty, grown: await measureGrown() });
          } else {
            const grown = await measureGrown();
            pairs.push({ scenario: name, empty: await measureEmpty(), grown });
          }
        }
      }
      servicePeak = Math.max(servicePeak, memoryOf(service.pid).hwm, memoryOf(twin.pid).hwm);
      growth = {
        rows: GROWTH_ROWS,
        seedSeconds: seeded.seconds,
        baselineSingle: baselineAgain,
        pairs,
      };
    }
    const baselinePeak = baseline ? memoryOf(baseline.pid).hwm : 0;
    return {
      database: kind,
      baseline: baselineRun,
      bulkFloor,
      service: results,
      latencyPairs,
      growth,
      webhookRounds,
      stageMoves,
      distribution,
      servicePeakRssBytes: servicePeak,
      serviceIdleRssBytes: serviceIdle,
      serviceStartHwmBytes: serviceStartHwm,
      baselinePeakRssBytes: baselinePeak,
      profiles,
    };
  } catch (error) {
    if (service) console.error(`service output (tail):\n${service.output().slice(-3_000)}`);
    if (baseline) console.error(`baseline output (tail):\n${baseline.output().slice(-3_000)}`);
    if (receiver) console.error(`receiver output (tail):\n${receiver.output().slice(-3_000)}`);
    if (movesReceiver)
      console.error(`automation receiver output (tail):\n${movesReceiver.output().slice(-3_000)}`);
    throw error;
  } finally {
    if (service) await stopProcess(service.process);
    if (baseline) await stopProcess(baseline.process);
    if (receiver) await stopProcess(receiver.process);
    if (movesReceiver) await stopProcess(movesReceiver.process);
    if (twin) await stopProcess(twin.process);
    await cleanUpAll();
  }
}

// ---------------------------------------------------------------------------------------------
// Report.

/** One alternating round of the bare baseline and single-record intake. */
function pairOf(baseline: Measured, service: Measured): LatencyPair {
  return {
    baselineP99: baseline.p99,
    serviceP99: service.p99,
    baselineRps: baseline.requestsPerSecond,
    serviceRps: service.requestsPerSecond,
    baselineWalKb: walKbPerRow(baseline),
    serviceWalKb: walKbPerRow(service),
  };
}

/** intake.distribution per database: records/s, deliveries/s and the receipt lag. */
function distributionTable(runs: DatabaseRun[]): string[] {
  const lines = [
    '| database | records/s | p50 ms | p99 ms | deliveries/s | delivered | lag p50 ms | lag p99 ms |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const run of runs) {
    const d = run.distribution;
    if (!d) continue;
    lines.push(
      `| ${run.database} | ${d.measured.requestsPerSecond} | ${d.measured.p50} | ${d.measured.p99} | ${d.deliveriesPerSecond} | ${d.delivered} / ${d.expected} | ${d.lag.p50} | ${d.lag.p99} |`,
    );
  }
  lines.push(
    '',
    `intake.distribution: single-record intake with the distribution node, ${DISTRIBUTION_PARTNERS} webhook ` +
      'participations (strategy `all`) on the local receiver; each answer waits for its first attempts. ' +
      "Lag is the receiver's clock at receipt minus the record's `created_at` (stamped in the committing transaction).",
  );
  return lines;
}

/** The deliveries of each webhook round: counts, rates, drain time and lag. */
function webhookTable(runs: DatabaseRun[]): string[] {
  const lines = [
    '| database | round | intake req/s plain | with subscription | ratio | records created | delivered | duplicates | missing | deliveries/s during load | deliveries/s to the last | drain s | lag p50 / p99 / max ms (from created_at) | lag p50 / p99 / max ms (from the 201) | signatures verified / invalid | receiver CPU ms/delivery |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|',
  ];
  for (const run of runs) {
    run.webhookRounds.forEach((round, index) => {
      const lag = (l: WebhookRound['lagFromCreated']) => `${l.p50} / ${l.p99} / ${l.max}`;
      lines.push(
        `| ${run.database} | ${index + 1} | ${round.plain.requestsPerSecond} | ${round.subscribed.requestsPerSecond} | ${pct1(webhookRatio(round))} | ${round.created} | ${round.delivered} | ${round.duplicates} | ${round.missing} | ${round.deliveriesPerSecondDuringLoad} | ${round.deliveriesPerSecondOverall} | ${round.drainSeconds ?? `> ${WEBHOOK_DRAIN}`} | ${lag(round.lagFromCreated)} | ${lag(round.lagFromAnswer)} | ${round.signaturesVerified} / ${round.signaturesInvalid} | ${round.receiverCpuMsPerDelivery} |`,
      );
    });
  }
  lines.push(
    '',
    'Webhook rounds: plain single-record intake and the same load into an account with one account webhook ' +
      'subscribed to `record.created` (a receiver process on 127.0.0.1 answering 200), back to back on one service ' +
      'process with its workers on. "delivered" counts created records whose message arrived; duplicates are ' +
      "repeated `webhook-id`s. Lag is the receiver's clock at receipt minus the record's `created_at` from the " +
      'payload (stamped by the writing statement, before its commit: an upper bound), and minus the moment the ' +
      'load generator read the 201 (after the commit: a lower bound; negative when the message arrived first). ' +
      `The drain is the time from the end of the load to the last message (at most ${WEBHOOK_DRAIN} s). ` +
      'The receiver runs on the same cores as the service and the database: its CPU per delivery is work a ' +
      'receiver on another machine would not take from the service.',
  );
  return lines;
}

/** Stage moves with their automation webhooks: the moves' rate and p99, the webhooks' rate and lag. */
function stageMoveTable(runs: DatabaseRun[]): string[] {
  const lines = [
    '| database | moves/s | p50 ms | p99 ms | CPU ms/move | moves | answers that moved nothing | webhooks delivered | duplicates | missing | webhooks/s during moves | webhooks/s to the last | drain s | lag p50 / p99 / max ms (from entered_at) | lag p50 / p99 / max ms (from the 200) | signatures verified / invalid |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|',
  ];
  for (const run of runs) {
    if (!run.stageMoves) continue;
    const { measured: m, webhooks: w } = run.stageMoves;
    const lag = (l: DeliveryStats['lagFromStamp']) => `${l.p50} / ${l.p99} / ${l.max}`;
    lines.push(
      `| ${run.database} | ${m.requestsPerSecond} | ${m.p50} | ${m.p99} | ${cpuPerRow(m)} | ${w.expected} | ${run.stageMoves.stayed} | ${w.delivered} | ${w.duplicates} | ${w.missing} | ${w.perSecondDuringLoad} | ${w.perSecondOverall} | ${w.drainSeconds ?? `> ${WEBHOOK_DRAIN}`} | ${lag(w.lagFromStamp)} | ${lag(w.lagFromAnswer)} | ${w.verifiedSoFar} / ${w.invalidSoFar} |`,
    );
  }
  lines.push(
    '',
    'Stage moves (`crm.stage_move`): the setup records moved New → Won → Contacted → Won … on a service with its ' +
      'workers, one webhook automation on Won and one on Contacted pointing to a receiver process on 127.0.0.1: ' +
      "every move queues one automation run, which the workers send while the moves go on. Lag is the receiver's " +
      "clock at receipt minus the move's `crm.entered_at` from the payload (stamped before the move's commit: an " +
      'upper bound), and minus the moment the load generator read the 200 (after the commit: a lower bound). ' +
      'CPU ms/move counts the service (its workers included) and the database. "moves" counts the answers that ' +
      'moved a record; a 200 that moved nothing (the record was in that stage already: autocannon prepares a ' +
      "request's path before it sends it, so the requests it abandons at the end of the warm-up leave their records " +
      'a cycle behind) runs no automation and is counted apart.',
  );
  return lines;
}

/** Total CPU (server and database) per row of `m` over that of `base`. */
function cpuRatio(m: Measured, base: Measured): number {
  const perRow = (x: Measured) =>
    (x.serverCpuMs + (x.databaseCpuMs ?? 0)) / Math.max(1, x.rowsPerSecond * x.seconds);
  return Math.round((perRow(m) / perRow(base)) * 10) / 10;
}

function machine() {
  let nproc = os.availableParallelism();
  try {
    nproc = Number(execFileSync('nproc', { encoding: 'utf8' }).trim());
  } catch {
    // nproc not available: the parallelism Node sees.
  }
  return {
    nproc,
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${os.type()} ${os.release()}`,
  };
}

function report(
  runs: DatabaseRun[],
  about: ReturnType<typeof machine>,
  started: Date,
  loadBefore: number[],
  loadAfter: number[],
): string {
  const load = (values: number[]) => values.map((v) => v.toFixed(1)).join(' ');
  const lines = [
    `Machine: ${about.nproc} CPUs (nproc; ${about.cpu}), ${about.memoryGiB} GiB memory, Node ${about.node}, ${about.platform}. ` +
      `Run ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${DURATION} s per scenario after ${WARMUP} s warm-up, ${CONNECTIONS} connections (bulk: ${BULK_CONNECTIONS} connections of 100 records). ` +
      `Load average (1/5/15 min) ${load(loadBefore)} before and ${load(loadAfter)} after. ` +
      'Server, database and load generator share the machine; on a machine loaded by other work the numbers are indicative only.',
    '',
    '| database | scenario | conns | req/s | rows/s | p50 ms | p99 ms | errors | non-2xx | server RSS MB | CPU ms/row | compared with | targets |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|',
  ];
  const allTargets: TargetResult[] = [];
  for (const run of runs) {
    const targets = targetsOf(run);
    allTargets.push(...targets);
    const verdicts = (match: (t: TargetResult) => boolean) =>
      targets
        .filter(match)
        .map(
          (t) =>
            `${t.target.replace(/^single-record intake |^bulk |^record reads |^notes by email /, '')}: **${t.verdict}** (${t.value})`,
        )
        .join('; ');
    const row = (m: Measured, compared: string, targetText: string) =>
      lines.push(
        `| ${run.database} | ${m.scenario} | ${m.connections} | ${m.requestsPerSecond} | ${m.rowsPerSecond} | ${m.p50} | ${m.p99} | ${m.errors} | ${m.non2xx} | ${mb(m.peakRssBytes)} | ${cpuPerRow(m)} | ${compared} | ${targetText} |`,
      );
    const base = run.baseline;
    if (base) {
      row(base.single, '', '');
      row(base.bulk, '', '');
      const floor = run.bulkFloor;
      if (floor) {
        lines.push(
          `| ${run.database} | floor.bulk100 (no server) | ${floor.connections} | ${floor.callsPerSecond} | ${floor.rowsPerSecond} | ${floor.p50} | ${floor.p99} | 0 | 0 | – | ${run.database === 'postgres' ? '0 + ' : ''}${floor.databaseCpuMsPerRow ?? '–'} | ${pct(floor.rowsPerSecond / base.bulk.rowsPerSecond)} of baseline.bulk100 rows/s |  |`,
        );
      }
      if (base.read) row(base.read, '', '');
    }
    for (const m of run.service) {
      if (!base) break;
      let compared = `${pct(m.requestsPerSecond / base.single.requestsPerSecond)} of baseline.single req/s`;
      let targetText = '';
      if (m.scenario === 'intake.bulk100') {
        compared = `${run.bulkFloor ? `${pct(m.rowsPerSecond / run.bulkFloor.rowsPerSecond)} of floor.bulk100 rows/s, ` : ''}${pct(m.rowsPerSecond / base.bulk.rowsPerSecond)} of baseline.bulk100 rows/s, CPU/row ${cpuRatio(m, base.bulk)}× the baseline's`;
        targetText = verdicts((t) => t.target.startsWith('bulk'));
      } else if (m.scenario === 'intake.idempotent') {
        compared += `, p99 ${times(m.p99 / base.single.p99)}`;
        targetText = verdicts((t) => t.target.startsWith('idempotent'));
      } else if (m.scenario === 'intake.single') {
        compared += `, p99 ${times(m.p99 / base.single.p99)}, CPU/row ${cpuRatio(m, base.single)}× the baseline's`;
        targetText = verdicts((t) => t.target.startsWith('single-record'));
      } else if (m.scenario === 'records.get' && base.read) {
        compared = `${pct(m.requestsPerSecond / base.read.requestsPerSecond)} of baseline.read req/s, p99 ${times(m.p99 / base.read.p99)}, CPU/row ${cpuRatio(m, base.read)}× the baseline's`;
        targetText = verdicts((t) => t.target.startsWith('record reads'));
      } else if (m.scenario === 'notes.by_email') {
        compared += `, p99 ${times(m.p99 / base.single.p99)}, CPU/row ${cpuRatio(m, base.single)}× the baseline's`;
        targetText = verdicts((t) => t.target.startsWith('notes by email'));
      }
      row(m, compared, targetText);
    }
    const first = run.webhookRounds[0];
    if (first) {
      row(first.plain, 'the service with its workers, no subscription', '');
      row(
        first.subscribed,
        `${pct(webhookRatio(first))} of ${first.plain.scenario} req/s (run right before it), p99 ${times(first.subscribed.p99 / first.plain.p99)}, CPU/row ${cpuRatio(first.subscribed, first.plain)}×`,
        verdicts((t) => t.target.startsWith('intake with one webhook')),
      );
    }
    if (run.growth && base) {
      const growth = run.growth;
      const drift = growth.baselineSingle.requestsPerSecond / base.single.requestsPerSecond;
      const label = (m: Measured) => ({
        ...m,
        scenario: `${m.scenario} @ ${growth.rows.toLocaleString('en')} records`,
      });
      row(label(growth.baselineSingle), `${pct(drift)} of the first baseline.single (machine drift)`, '');
      for (const { scenario, pairs, ratio } of growthVerdicts(growth)) {
        const [first] = pairs;
        if (!first) continue;
        row(
          { ...first.empty, scenario: `${scenario} (empty twin)` },
          'the same service on a database with the setup alone, in turns with the grown one',
          '',
        );
        const p99 = median(pairs.map((pair) => pair.grown.p99 / pair.empty.p99));
        const phaseOne = run.service.find((e) => e.scenario === scenario);
        const againstPhaseOne = phaseOne
          ? `; first round against the first phase's empty run ${pct(first.grown.requestsPerSecond / phaseOne.requestsPerSecond)} (${pct(first.grown.requestsPerSecond / phaseOne.requestsPerSecond / drift)} corrected for drift)`
          : '';
        row(
          label({ ...first.grown, scenario }),
          `${pct(ratio)} of the empty twin (median of ${pairs.length} alternating pairs), p99 ${times(p99)}${againstPhaseOne}`,
          verdicts((t) => t.target.startsWith(scenario)),
        );
      }
    }
  }
  lines.push('', '| database | target | value | verdict |', '|---|---|---|---|');
  for (const t of allTargets) lines.push(`| ${t.database} | ${t.target} | ${t.value} | **${t.verdict}** |`);
  if (runs.some((run) => run.webhookRounds.length > 0)) lines.push('', ...webhookTable(runs));
  if (runs.some((run) => run.stageMoves)) lines.push('', ...stageMoveTable(runs));
  if (runs.some((run) => run.distribution)) lines.push('', ...distributionTable(runs));
  lines.push(
    '',
    "Peak server RSS is the service process's VmHWM over its life: " +
      runs
        .map(
          (run) =>
            `${run.database} ${mb(run.servicePeakRssBytes)} MB (after start-up and setup, before any load: ${mb(run.serviceIdleRssBytes)} MB resident, ${mb(run.serviceStartHwmBytes)} MB peak; baseline's peak ${mb(run.baselinePeakRssBytes)} MB)`,
        )
        .join(', ') +
      '. The per-scenario column is the highest VmRSS sampled every 250 ms during that scenario.',
    '',
    'floor.bulk100: the rows the service writes for a 100-record bulk call (100 record rows of the bench entity and ' +
      "the call's one intake-log entry listing each entry's outcome) into the service's own tables, by one prepared " +
      'statement a call generating its rows inside the database, with no server in between (bench/floor.ts); bulk is ' +
      'judged against it. On PostgreSQL on as many connections as bulk (CPU: their backends); on the embedded ' +
      "database, which admits one process and has one session, in a process of its own started with the start script's " +
      "Node flags on the service's data directory while the service is stopped, one call after the other (CPU: that " +
      'process).',
    '',
    'CPU ms/row: CPU time (from /proc) the server process used per row written or read, plus on PostgreSQL ' +
      "that of the database's backend processes (background writers not counted). It depends far less on " +
      'what else runs on the machine than req/s does.',
  );
  if (runs.some((r) => r.growth)) {
    const growth = runs.find((r) => r.growth)!.growth!;
    lines.push(
      '',
      `Growth: ${growth.rows.toLocaleString('en')} records and as many stored idempotency answers seeded straight into their tables (${runs
        .filter((r) => r.growth)
        .map((r) => `${r.database} ${r.growth!.seedSeconds} s`)
        .join(
          ', ',
        )}), then the service restarted and warmed up; "machine drift" is the baseline measured again at that point.`,
    );
  }
  return `${lines.join('\n')}\n`;
}

// ---------------------------------------------------------------------------------------------

const started = new Date();
const loadBefore = os.loadavg();
const perScenario = DURATION + WARMUP + 45;
const budgetSeconds =
  DATABASES.length *
  (13 * perScenario +
    2 * (LATENCY_ROUNDS - 1) * perScenario +
    300 +
    (GROWTH ? 12 * perScenario + GROWTH_ROWS / 250 : 0) +
    (WEBHOOK ? 3 * perScenario + WEBHOOK_ROUNDS * (2 * perScenario + WEBHOOK_DRAIN + 30) : 0) +
    (STAGE_MOVES ? 2 * perScenario + 2 * WEBHOOK_DRAIN + 30 : 0) +
    (DISTRIBUTION ? 2 * perScenario + WEBHOOK_DRAIN + 60 : 0));
const watchdog = setTimeout(() => {
  console.error(`\nThe bench ran longer than ${Math.round(budgetSeconds)} s: stopping everything.`);
  void cleanUpAll().finally(() => process.exit(1));
}, budgetSeconds * 1000);
watchdog.unref();

console.log(
  `bench: ${DATABASES.join(' and ')}, ${DURATION} s per scenario, ${CONNECTIONS} connections, warm-up ${WARMUP} s` +
    (GROWTH ? `, growth to ${GROWTH_ROWS.toLocaleString('en')} records` : '') +
    `; load average ${loadBefore.map((v) => v.toFixed(1)).join(' ')}`,
);
const runs: DatabaseRun[] = [];
try {
  for (const kind of DATABASES) runs.push(await benchDatabase(kind));
} catch (error) {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  await cleanUpAll();
  process.exit(1);
}
clearTimeout(watchdog);

const about = machine();
const loadAfter = os.loadavg();
const markdown = report(runs, about, started, loadBefore, loadAfter);
mkdirSync(RESULTS, { recursive: true });
writeFileSync(
  path.join(RESULTS, 'latest.json'),
  `${JSON.stringify(
    {
      date: started.toISOString(),
      machine: { ...about, loadBefore, loadAfter },
      settings: {
        duration: DURATION,
        connections: CONNECTIONS,
        bulkConnections: BULK_CONNECTIONS,
        warmup: WARMUP,
        latencyRounds: LATENCY_ROUNDS,
        growth: GROWTH ? GROWTH_ROWS : null,
        setupRecords: SETUP_RECORDS,
        scenarios: SCENARIOS,
        webhookRounds: WEBHOOK ? WEBHOOK_ROUNDS : null,
        webhookDrain: WEBHOOK_DRAIN,
      },
      runs: runs.map((run) => ({ ...run, targets: targetsOf(run) })),
    },
    null,
    2,
  )}\n`,
);
writeFileSync(path.join(RESULTS, 'latest.md'), markdown);
console.log(`\n${markdown}`);
for (const run of runs) {
  for (const file of run.profiles) {
    console.log(`\nCPU profile ${path.relative(ROOT, file)}:`);
    console.log(summarizeProfile(file, 25));
  }
}
