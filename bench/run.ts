/**
 * `npm run bench`: intake throughput of the real server against a bare baseline, in one run on
 * the same machine, on PostgreSQL and on the embedded database. Not part of the test suite.
 *
 * Env: BENCH_DB=postgres|pglite|both (both), BENCH_DURATION seconds per scenario (10),
 * BENCH_CONNECTIONS (50), BENCH_GROWTH=1 to repeat two scenarios after seeding
 * BENCH_GROWTH_ROWS records (1,000,000).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { sql } from 'kysely';
import { openDatabase } from '../src/db/client.ts';
import { createPostgresDatabase } from '../test/helpers/databases.ts';
import { freePort } from '../test/helpers/server-process.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE = process.execPath;
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const GROWTH = process.env.BENCH_GROWTH === '1';
const GROWTH_ROWS = Number(process.env.BENCH_GROWTH_ROWS ?? 1_000_000);
const DATABASES =
  (process.env.BENCH_DB ?? 'both') === 'both' ? ['postgres', 'pglite'] : [process.env.BENCH_DB!];
const ADMIN_TOKEN = `adm_bench_${randomBytes(12).toString('hex')}`;

interface Child {
  process: ChildProcess;
  url: string;
  peakRss: number;
  sampler: NodeJS.Timeout;
}

function rssOf(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

async function startChild(args: string[], env: Record<string, string>): Promise<Child> {
  const port = await freePort();
  const child = spawn(NODE, args, {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited early`);
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${args.join(' ')} did not start`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const handle: Child = { process: child, url, peakRss: 0, sampler: setInterval(() => {}, 1000) };
  clearInterval(handle.sampler);
  handle.sampler = setInterval(() => {
    handle.peakRss = Math.max(handle.peakRss, rssOf(child.pid!));
  }, 200);
  return handle;
}

async function stopChild(child: Child | undefined): Promise<void> {
  if (!child) return;
  clearInterval(child.sampler);
  if (child.process.exitCode !== null) return;
  const exited = new Promise((resolve) => child.process.once('exit', resolve));
  child.process.kill('SIGTERM');
  const timer = setTimeout(() => child.process.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

async function api(base: string, key: string, method: string, url: string, body?: unknown): Promise<any> {
  const response = await fetch(base + url, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** A realistic entity: 10 fields of several types, an email duplicate rule. */
const ENTITY = {
  name: 'Lead',
  fields: [
    { key: 'first_name', label: 'First name', type: 'text', role: 'first_name' },
    { key: 'last_name', label: 'Last name', type: 'text', role: 'last_name' },
    { key: 'email', label: 'Email', type: 'text', format: 'email', required: true, role: 'email' },
    { key: 'phone', label: 'Phone', type: 'text', format: 'phone', role: 'phone' },
    { key: 'company', label: 'Company', type: 'text', role: 'company' },
    { key: 'interest', label: 'Interest', type: 'select', options: ['Solar', 'Heat pump', 'Battery'] },
    { key: 'budget', label: 'Budget', type: 'number', format: 'currency' },
    { key: 'consent', label: 'Consent', type: 'boolean' },
    { key: 'move_in', label: 'Move in', type: 'date' },
    { key: 'message', label: 'Message', type: 'textarea' },
  ],
  duplicate_rule: { match: ['email'], action: 'update' },
  pipelines: [{ name: 'Sales', stages: ['New', 'Contacted', 'Won'] }],
};

let sequence = 0;
const runId = randomBytes(3).toString('hex');
function leadFields(withUnknown: boolean): Record<string, unknown> {
  const n = sequence++;
  const fields: Record<string, unknown> = {
    first_name: 'Ada',
    last_name: `Bench${n}`,
    email: `b${runId}-${n}@bench.test`,
    phone: '+49 30 1234567',
    company: 'Bench GmbH',
    interest: 'Solar',
    budget: '12500',
    consent: 'yes',
    move_in: '2027-03-01',
    message: 'Please call me in the morning.',
  };
  if (withUnknown) Object.assign(fields, { a1: 1, a2: 2, a3: 3, a4: 4, a5: 5 });
  return fields;
}

interface Measured {
  scenario: string;
  requestsPerSecond: number;
  rowsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

async function load(
  scenario: string,
  url: string,
  request: {
    method: 'GET' | 'POST';
    path: string;
    headers: Record<string, string>;
    next: () => { path?: string; body?: string };
  },
  rowsPerRequest = 1,
): Promise<Measured> {
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: DURATION,
    requests: [
      {
        method: request.method,
        path: request.path,
        headers: request.headers,
        setupRequest: (req) => ({ ...req, ...request.next() }),
      },
    ],
  });
  const measured = {
    scenario,
    requestsPerSecond: Math.round(result.requests.average),
    rowsPerSecond: Math.round(result.requests.average * rowsPerRequest),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
  };
  console.log(
    `  ${scenario.padEnd(28)} ${String(measured.requestsPerSecond).padStart(6)} req/s  p50 ${measured.p50} ms  p99 ${measured.p99} ms  errors ${measured.errors}  non-2xx ${measured.non2xx}`,
  );
  return measured;
}

const json = { 'content-type': 'application/json' };

async function runScenarios(service: Child, key: string, emails: string[], ids: string[], only?: string[]) {
  const auth = { authorization: `Bearer ${key}` };
  const results: Measured[] = [];
  const want = (name: string) => !only || only.includes(name);
  let cursor = 0;
  if (want('intake.single')) {
    results.push(
      await load('intake.single', service.url, {
        method: 'POST',
        path: '/api/v1/records',
        headers: { ...auth, ...json },
        next: () => ({ body: JSON.stringify({ entity: 'lead', fields: leadFields(sequence % 4 === 0) }) }),
      }),
    );
  }
  if (want('intake.idempotent')) {
    results.push(
      await load('intake.idempotent', service.url, {
        method: 'POST',
        path: '/api/v1/records',
        headers: { ...auth, ...json },
        next: () => ({
          body: JSON.stringify({
            entity: 'lead',
            fields: leadFields(false),
            meta: { idempotency_key: `k-${runId}-${sequence}` },
          }),
        }),
      }),
    );
  }
  if (want('intake.bulk100')) {
    results.push(
      await load(
        'intake.bulk100',
        service.url,
        {
          method: 'POST',
          path: '/api/v1/records/bulk',
          headers: { ...auth, ...json },
          next: () => ({
            body: JSON.stringify({
              records: Array.from({ length: 100 }, () => ({ entity: 'lead', fields: leadFields(false) })),
            }),
          }),
        },
        100,
      ),
    );
  }
  if (want('s1.intake.form')) {
    results.push(
      await load('s1.intake.form', service.url, {
        method: 'POST',
        path: '/api/intake',
        headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
        next: () => ({
          body: new URLSearchParams({
            entity: 'lead',
            ...(leadFields(false) as Record<string, string>),
          }).toString(),
        }),
      }),
    );
  }
  if (want('records.get')) {
    results.push(
      await load('records.get', service.url, {
        method: 'GET',
        path: '/api/v1/records',
        headers: auth,
        next: () => ({ path: `/api/v1/records/${ids[cursor++ % ids.length]}` }),
      }),
    );
  }
  if (want('notes.by_email')) {
    results.push(
      await load('notes.by_email', service.url, {
        method: 'POST',
        path: '/api/v1/notes',
        headers: { ...auth, ...json },
        next: () => ({
          body: JSON.stringify({
            email: emails[cursor++ % emails.length]!.toUpperCase(),
            body: 'Called back',
          }),
        }),
      }),
    );
  }
  return results;
}

async function seed(database: Awaited<ReturnType<typeof openDatabase>>, accountId: string, rows: number) {
  const entity = await database.db
    .selectFrom('entities')
    .select('id')
    .where('account_id', '=', accountId)
    .where('key', '=', 'lead')
    .executeTakeFirstOrThrow();
  const batch = 100_000;
  for (let start = 0; start < rows; start += batch) {
    const end = Math.min(rows, start + batch);
    await sql`
      INSERT INTO records (account_id, id, entity_id, name, fields, source, origin, email_lc, dedupe_key, created_at, updated_at)
      SELECT ${accountId}::uuid, gen_random_uuid(), ${entity.id}::uuid, 'Seed ' || n,
        jsonb_build_object('email', 'seed' || n || '@seed.test', 'first_name', 'Seed', 'last_name', 'N' || n,
          'company', 'Seed Co', 'interest', 'Solar', 'budget', 1000 + n % 5000, 'consent', true),
        'seed', '{}'::jsonb, 'seed' || n || '@seed.test', 'seed' || n || '@seed.test',
        now() - make_interval(secs => n), now() - make_interval(secs => n)
      FROM generate_series(${start}::int, ${end - 1}::int) AS n`.execute(database.db);
  }
  await sql`ANALYZE records`.execute(database.db);
}

interface DatabaseRun {
  database: string;
  results: Measured[];
  baseline: { single: Measured; bulk: Measured };
  growth: Measured[] | null;
  peakRssBytes: number;
}

async function benchDatabase(kind: string): Promise<DatabaseRun> {
  console.log(`\n${kind}`);
  const cleanups: (() => Promise<void>)[] = [];
  let service: Child | undefined;
  let baseline: Child | undefined;
  try {
    const serviceEnv: Record<string, string> = {
      LEADS_ADMIN_TOKEN: ADMIN_TOKEN,
      LEADS_DEMO: 'false',
      LEADS_RUN_WORKERS: 'false',
    };
    const baselineEnv: Record<string, string> = {};
    if (kind === 'postgres') {
      const database = await createPostgresDatabase();
      cleanups.push(database.drop);
      serviceEnv.DATABASE_URL = database.url;
      baselineEnv.DATABASE_URL = database.url;
    } else {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'leads-bench-'));
      const baseDir = await mkdtemp(path.join(os.tmpdir(), 'leads-bench-base-'));
      cleanups.push(
        () => rm(dir, { recursive: true, force: true }),
        () => rm(baseDir, { recursive: true, force: true }),
      );
      serviceEnv.LEADS_DATA_DIR = dir;
      baselineEnv.LEADS_DATA_DIR = baseDir;
    }
    baseline = await startChild([path.join(ROOT, 'bench/baseline-server.ts')], baselineEnv);
    const baseSingle = await load('baseline.single', baseline.url, {
      method: 'POST',
      path: '/records',
      headers: json,
      next: () => ({ body: JSON.stringify({ entity: 'lead', fields: leadFields(sequence % 4 === 0) }) }),
    });
    const baseBulk = await load(
      'baseline.bulk100',
      baseline.url,
      {
        method: 'POST',
        path: '/records/bulk',
        headers: json,
        next: () => ({
          body: JSON.stringify({
            records: Array.from({ length: 100 }, () => ({ entity: 'lead', fields: leadFields(false) })),
          }),
        }),
      },
      100,
    );
    await stopChild(baseline);
    baseline = undefined;

    service = await startChild([path.join(ROOT, 'bin/leads.js'), 'serve'], serviceEnv);
    const account = await api(service.url, ADMIN_TOKEN, 'POST', '/admin/v1/accounts', {
      name: 'Bench',
      rate_limit_per_minute: 1_000_000,
    });
    const key: string = account.api_key.key;
    await api(service.url, key, 'PUT', '/api/v1/settings/entities/lead', ENTITY);
    const setup = await api(service.url, key, 'POST', '/api/v1/records/bulk', {
      records: Array.from({ length: 100 }, () => ({ entity: 'lead', fields: leadFields(false) })),
    });
    const ids: string[] = setup.results.map((r: { id: string }) => r.id);
    const emails = (
      await Promise.all(ids.slice(0, 100).map((id) => api(service!.url, key, 'GET', `/api/v1/records/${id}`)))
    ).map((r) => r.fields.email as string);
    const results = await runScenarios(service, key, emails, ids);
    let peakRssBytes = service.peakRss;

    let growth: Measured[] | null = null;
    if (GROWTH) {
      await stopChild(service);
      service = undefined;
      console.log(`  seeding ${GROWTH_ROWS} records…`);
      const database = await openDatabase({
        databaseUrl: serviceEnv.DATABASE_URL,
        dataDir: serviceEnv.LEADS_DATA_DIR ?? '',
        poolSize: 2,
      });
      try {
        await seed(database, account.id, GROWTH_ROWS);
      } finally {
        await database.close();
      }
      service = await startChild([path.join(ROOT, 'bin/leads.js'), 'serve'], serviceEnv);
      growth = await runScenarios(service, key, emails, ids, ['intake.single', 'notes.by_email']);
      peakRssBytes = Math.max(peakRssBytes, service.peakRss);
    }
    return {
      database: kind,
      results,
      baseline: { single: baseSingle, bulk: baseBulk },
      growth,
      peakRssBytes,
    };
  } finally {
    await stopChild(service);
    await stopChild(baseline);
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  }
}

function verdict(ok: boolean): string {
  return ok ? 'met' : 'missed';
}

function report(runs: DatabaseRun[]): string {
  const lines = [
    `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${new Date().toISOString()}; ${DURATION} s per scenario, ${CONNECTIONS} connections; server, database and load generator share the machine.`,
    '',
    '| database | scenario | req/s | rows/s | p50 ms | p99 ms | errors + non-2xx | vs baseline |',
    '|---|---|---|---|---|---|---|---|',
  ];
  const targets: string[] = [];
  for (const run of runs) {
    const base = run.baseline;
    for (const m of [
      base.single,
      base.bulk,
      ...run.results,
      ...(run.growth ?? []).map((g) => ({ ...g, scenario: `${g.scenario} (grown)` })),
    ]) {
      let ratio = '';
      if (m.scenario.startsWith('intake.bulk'))
        ratio = `${Math.round((m.rowsPerSecond / base.bulk.rowsPerSecond) * 100)}% rows/s`;
      else if (!m.scenario.startsWith('baseline'))
        ratio = `${Math.round((m.requestsPerSecond / base.single.requestsPerSecond) * 100)}%`;
      lines.push(
        `| ${run.database} | ${m.scenario} | ${m.requestsPerSecond} | ${m.rowsPerSecond} | ${m.p50} | ${m.p99} | ${m.errors + m.non2xx} | ${ratio} |`,
      );
    }
    const single = run.results.find((r) => r.scenario === 'intake.single');
    const bulk = run.results.find((r) => r.scenario === 'intake.bulk100');
    if (single) {
      targets.push(
        `- ${run.database}: single-record intake ≥ 70% of the baseline's req/s: ${verdict(single.requestsPerSecond >= 0.7 * base.single.requestsPerSecond)} (${Math.round((single.requestsPerSecond / base.single.requestsPerSecond) * 100)}%); p99 ≤ 1.5× the baseline's: ${verdict(single.p99 <= 1.5 * base.single.p99)} (${single.p99} vs ${base.single.p99} ms)`,
      );
    }
    if (bulk) {
      targets.push(
        `- ${run.database}: bulk ≥ 75% of the baseline's multi-row rate: ${verdict(bulk.rowsPerSecond >= 0.75 * base.bulk.rowsPerSecond)} (${Math.round((bulk.rowsPerSecond / base.bulk.rowsPerSecond) * 100)}%)`,
      );
    }
    if (run.growth && single) {
      const grown = run.growth.find((g) => g.scenario === 'intake.single');
      if (grown) {
        targets.push(
          `- ${run.database}: after ${GROWTH_ROWS} records, single-record intake within 10% of the empty run: ${verdict(grown.requestsPerSecond >= 0.9 * single.requestsPerSecond)}`,
        );
      }
    }
    const mb = Math.round(run.peakRssBytes / 2 ** 20);
    targets.push(
      `- ${run.database}: peak server RSS ${mb} MB${run.database === 'postgres' ? ` (target < 200 MB: ${verdict(mb < 200)})` : ''}`,
    );
  }
  return [...lines, '', 'Targets:', ...targets, ''].join('\n');
}

const runs: DatabaseRun[] = [];
for (const kind of DATABASES) runs.push(await benchDatabase(kind));
const markdown = report(runs);
await writeFile(
  path.join(ROOT, 'bench/results/latest.json'),
  `${JSON.stringify({ date: new Date().toISOString(), duration: DURATION, connections: CONNECTIONS, runs }, null, 2)}\n`,
);
await writeFile(path.join(ROOT, 'bench/results/latest.md'), markdown);
console.log(`\n${markdown}`);
