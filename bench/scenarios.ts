/**
 * What `npm run bench` sends: the entity it sets up, the request bodies, the scenarios against the
 * service and the baseline, and the one function that drives autocannon. Every load run is
 * bounded in time (the scenario's duration, with a hard stop shortly after) and in count.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';

/** A realistic entity: 10 fields of the main types, an email duplicate rule, one pipeline. */
export const ENTITY = {
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

export const INTERESTS = ['Solar', 'Heat pump', 'Battery'];
const FIRST_NAMES = ['Ada', 'Bo', 'Cyra', 'Dan', 'Eva', 'Finn', 'Greta', 'Hugo'];

/** Unique lead bodies: every email is new, so that every single-record intake creates a record. */
export class Bodies {
  private sequence = 0;
  private readonly runId: string;
  constructor(runId: string) {
    this.runId = runId;
  }

  /** The next lead's fields, typed as a JSON client sends them; with `unknown`, 5 unknown keys too. */
  fields(unknown = false): Record<string, unknown> {
    const n = this.sequence++;
    const fields: Record<string, unknown> = {
      first_name: FIRST_NAMES[n % FIRST_NAMES.length],
      last_name: `Bench${n}`,
      email: `Lead.${this.runId}.${n}@Bench.example`,
      phone: `+49 30 ${String(1_000_000 + (n % 9_000_000))}`,
      company: n % 3 === 0 ? '' : `Company ${n % 500} GmbH`,
      interest: INTERESTS[n % INTERESTS.length],
      budget: 5_000 + (n % 40) * 500,
      consent: n % 2 === 0,
      move_in: `2027-${String(1 + (n % 12)).padStart(2, '0')}-${String(1 + (n % 28)).padStart(2, '0')}`,
      message: 'Please call me in the morning about an offer for our house.',
    };
    if (unknown) Object.assign(fields, { utm_id: 'x1', landing: '/solar', ab: 'B', ref_code: 'R7', gad: 1 });
    return fields;
  }

  /** A single-record body; every fourth one carries 5 unknown keys (5 `unmapped` warnings). */
  record(idempotent = false): string {
    const unknown = this.sequence % 4 === 0;
    const body: Record<string, unknown> = { entity: 'lead', fields: this.fields(unknown) };
    if (idempotent) body.meta = { idempotency_key: `bench-${this.runId}-${this.sequence}` };
    return JSON.stringify(body);
  }

  bulk(size = 100): string {
    return JSON.stringify({
      records: Array.from({ length: size }, () => ({ entity: 'lead', fields: this.fields(false) })),
    });
  }

  /** An S1 form post: field labels as a web form names them, every value a string. */
  s1Form(): string {
    const f = this.fields(false);
    return new URLSearchParams({
      entity: 'lead',
      'First Name': String(f.first_name),
      'Last Name': String(f.last_name),
      'E-Mail': String(f.email),
      Phone: String(f.phone),
      Company: String(f.company),
      Interest: String(f.interest).toLowerCase(),
      Budget: String(f.budget),
      Consent: f.consent ? 'yes' : 'no',
      'Move in': String(f.move_in),
      Message: String(f.message),
    }).toString();
  }
}

export interface LoadRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  /** The next request's path and body; called once per request. */
  next(): { path?: string; body?: string };
}

export interface Scenario {
  name: string;
  request: LoadRequest;
  /** How the rows of one answer are counted: 1 each, or the bulk answer's `accepted`. */
  rows: 'one' | 'accepted';
  /** Status codes a correct answer has; the preflight request must get one of them. */
  expect: number[];
  /** Connections for this scenario, when not the bench's BENCH_CONNECTIONS (bulk: BENCH_BULK_CONNECTIONS). */
  connections?: number;
  /** Extra check of the preflight answer (`sent` is the request body); returns what is wrong. */
  check?(body: any, sent: string | undefined): string | undefined;
  /** Sees every answer of the measured run (not of the warm-up), as it arrives. */
  onResponse?(status: number, body: string): void;
}

export interface Measured {
  scenario: string;
  connections: number;
  requestsPerSecond: number;
  rowsPerSecond: number;
  p50: number;
  p99: number;
  /** Connection errors, timeouts included (autocannon's `errors`). */
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodes: Record<string, number>;
  requests: number;
  seconds: number;
  /** Highest resident set of the server process sampled during this scenario. */
  peakRssBytes: number;
  /** CPU time the server process used during the scenario, in ms. */
  serverCpuMs: number;
  /** CPU time the PostgreSQL backends of the bench's database used during the scenario, in ms (null on PGlite). */
  databaseCpuMs: number | null;
  /** When the measured load began (after the warm-up), to set beside the database server's log. */
  startedAt: string;
  /**
   * Bytes of WAL the PostgreSQL server wrote during the scenario (null on PGlite). More bytes a
   * row than in the same scenario's other rounds mean full-page images: a checkpoint began.
   */
  walBytes: number | null;
}

export interface LoadOptions {
  duration: number;
  connections: number;
  /** Server process whose memory is sampled while the load runs. */
  pid: number;
  /** PostgreSQL backends serving the bench's database, whose CPU time is counted too. */
  databasePids?: () => Promise<number[]>;
  /** PostgreSQL: the server's WAL insert position in bytes (`pg_current_wal_lsn()`). */
  walPosition?: () => Promise<number>;
}

/** Resident memory of a process from /proc: the current (VmRSS) and the high-water mark (VmHWM). */
export function memoryOf(pid: number): { rss: number; hwm: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) * 1024;
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return { rss: 0, hwm: 0 };
  }
}

export let CLOCK_TICKS_PER_SECOND = 100;
try {
  CLOCK_TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  // getconf missing: Linux's usual 100.
}

function cpuMsOf(pids: number[]): Map<number, number> {
  return new Map(pids.map((pid) => [pid, (cpuTicksOf(pid) * 1000) / CLOCK_TICKS_PER_SECOND]));
}

/** CPU time (user + system, in clock ticks) a process has used so far. */
export function cpuTicksOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/**
 * Waits until the server has finished the work of the previous scenario: requests that
 * autocannon abandoned at its end keep running on the server (a bulk call takes seconds), and
 * would otherwise be measured as part of the next scenario. Idle means under 5% of a core over
 * `windowMs` (half a second unless said); gives up after `maxMs`.
 */
export function settle(pid: number, maxMs = 30_000, windowMs = 500): Promise<void> {
  return settleAll(async () => [pid], maxMs, windowMs);
}

/**
 * Waits until a set of processes that may change (one server, or a PostgreSQL server's backends,
 * autovacuum workers and writers) is idle, their CPU taken together: under 5% of a core over
 * `windowMs`; a process that started within the window counts with all its CPU. Gives up after
 * `maxMs`.
 */
export async function settleAll(
  pids: () => Promise<number[]>,
  maxMs = 30_000,
  windowMs = 1_000,
): Promise<void> {
  const deadline = Date.now() + maxMs;
  // Clock ticks are 1/100 s: 5% of a core over 0.5 s is 2.5 ticks.
  const quietTicks = Math.floor(windowMs / 200);
  let before = new Map((await pids()).map((pid) => [pid, cpuTicksOf(pid)]));
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const now = new Map((await pids()).map((pid) => [pid, cpuTicksOf(pid)]));
    let used = 0;
    for (const [pid, ticks] of now) used += ticks - (before.get(pid) ?? 0);
    if (used <= quietTicks) return;
    before = now;
  }
}

/** Sends one request of the scenario and checks the answer, so that a broken scenario fails loudly. */
export async function preflight(url: string, scenario: Scenario): Promise<void> {
  const { path, body } = scenario.request.next();
  const response = await fetch(url + (path ?? scenario.request.path), {
    method: scenario.request.method,
    headers: scenario.request.headers,
    body,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  let problem = scenario.expect.includes(response.status)
    ? undefined
    : `status ${response.status}, expected ${scenario.expect.join(' or ')}`;
  if (!problem && scenario.check) problem = scenario.check(text ? JSON.parse(text) : null, body);
  if (problem) throw new Error(`${scenario.name}: preflight failed: ${problem}: ${text.slice(0, 500)}`);
}

/** Drives one scenario for `duration` seconds with `connections` connections. */
export async function measure(url: string, scenario: Scenario, options: LoadOptions): Promise<Measured> {
  let rows = 0;
  let peakRss = memoryOf(options.pid).rss;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, memoryOf(options.pid).rss);
  }, 250);
  const countAccepted = scenario.rows === 'accepted';
  const serverCpuBefore = cpuTicksOf(options.pid);
  const databaseBefore = options.databasePids ? cpuMsOf(await options.databasePids()) : null;
  const walBefore = options.walPosition ? await options.walPosition() : null;
  const startedAt = new Date().toISOString();
  const instance = autocannon({
    url,
    connections: scenario.connections ?? options.connections,
    duration: options.duration,
    // A bulk call can take several seconds under 50 connections: give it time, not an error.
    timeout: 30,
    // Bounded in count as well as in time.
    maxOverallRequests: 5_000_000,
    requests: [
      {
        method: scenario.request.method,
        path: scenario.request.path,
        headers: scenario.request.headers,
        setupRequest: (request) => ({ ...request, ...scenario.request.next() }),
        ...(countAccepted || scenario.onResponse
          ? {
              onResponse: (status: number, body: string) => {
                if (countAccepted && status < 300) rows += Number(/"accepted":(\d+)/.exec(body)?.[1] ?? 0);
                scenario.onResponse?.(status, body);
              },
            }
          : {}),
      },
    ],
  });
  // Hard stop, should autocannon not end by itself.
  const guard = setTimeout(
    () => (instance as unknown as { stop(): void }).stop(),
    (options.duration + 45) * 1000,
  );
  let result: autocannon.Result;
  try {
    result = await instance;
  } finally {
    clearTimeout(guard);
    clearInterval(sampler);
  }
  peakRss = Math.max(peakRss, memoryOf(options.pid).rss);
  const serverCpuMs = ((cpuTicksOf(options.pid) - serverCpuBefore) * 1000) / CLOCK_TICKS_PER_SECOND;
  let databaseCpuMs: number | null = null;
  if (databaseBefore && options.databasePids) {
    // Backends that the pools opened during the run started from nothing.
    const after = cpuMsOf(await options.databasePids());
    databaseCpuMs = 0;
    for (const [pid, ms] of after) databaseCpuMs += ms - (databaseBefore.get(pid) ?? 0);
  }
  const walBytes =
    walBefore !== null && options.walPosition ? (await options.walPosition()) - walBefore : null;
  const seconds = result.duration;
  const statusCodes: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) {
    statusCodes[code] = Number((stat as { count: number | string }).count);
  }
  const connections = scenario.connections ?? options.connections;
  const ok = Object.entries(statusCodes)
    .filter(([code]) => code.startsWith('2'))
    .reduce((sum, [, count]) => sum + count, 0);
  const measured: Measured = {
    scenario: scenario.name,
    connections,
    requestsPerSecond: Math.round(result.requests.average),
    rowsPerSecond: Math.round(countAccepted ? rows / seconds : ok / seconds),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    statusCodes,
    requests: result.requests.total,
    seconds: Math.round(seconds * 10) / 10,
    peakRssBytes: peakRss,
    serverCpuMs: Math.round(serverCpuMs),
    databaseCpuMs: databaseCpuMs === null ? null : Math.round(databaseCpuMs),
    startedAt,
    walBytes,
  };
  const mb = Math.round(peakRss / 2 ** 20);
  const perRow = cpuPerRow(measured);
  const walKb = walKbPerRow(measured);
  console.log(
    `  ${scenario.name.padEnd(26)} ${String(measured.requestsPerSecond).padStart(6)} req/s ${String(measured.rowsPerSecond).padStart(7)} rows/s  p50 ${measured.p50} ms  p99 ${measured.p99} ms  errors ${measured.errors}  non-2xx ${measured.non2xx}  rss ${mb} MB  cpu/row ${perRow}${walKb === null ? '' : `  wal/row ${walKb.toFixed(2)} kB`}`,
  );
  return measured;
}

/** CPU ms per row written or read: the server's, plus the database backends' on PostgreSQL. */
export function cpuPerRow(m: Measured): string {
  const rows = m.rowsPerSecond * m.seconds;
  if (rows <= 0) return '–';
  const format = (ms: number) => (ms / rows).toFixed(ms / rows < 0.1 ? 3 : 2);
  return m.databaseCpuMs === null
    ? format(m.serverCpuMs)
    : `${format(m.serverCpuMs)} + ${format(m.databaseCpuMs)}`;
}

/** WAL written a row, in kB (two decimals): null on PGlite or without rows. */
export function walKbPerRow(m: Measured): number | null {
  const rows = m.rowsPerSecond * m.seconds;
  if (m.walBytes === null || rows <= 0) return null;
  return Math.round((m.walBytes / rows / 1024) * 100) / 100;
}

const JSON_TYPE = { 'content-type': 'application/json' };

/** Checks an intake answer: a record was created. */
function createdRecord(body: any): string | undefined {
  if (typeof body?.id !== 'string' || body.created !== true) return 'no record created';
  return undefined;
}

/** The baseline's rows to read and the key its reads present (bench/baseline-server.ts). */
export interface BaselineReads {
  apiKey: string;
  ids: string[];
}

export function baselineScenarios(
  bodies: Bodies,
  bulkConnections: number,
  reads: BaselineReads = { apiKey: '', ids: [] },
): { single: Scenario; bulk: Scenario; read: Scenario } {
  let readCursor = 0;
  return {
    read: {
      name: 'baseline.read',
      request: {
        method: 'GET',
        path: '/records',
        headers: { authorization: `Bearer ${reads.apiKey}` },
        next: () => ({ path: `/records/${reads.ids[readCursor++ % reads.ids.length]}` }),
      },
      rows: 'one',
      expect: [200],
      check: (body) => (typeof body?.fields?.email === 'string' ? undefined : 'no record'),
    },
    single: {
      name: 'baseline.single',
      request: {
        method: 'POST',
        path: '/records',
        headers: JSON_TYPE,
        next: () => ({ body: bodies.record() }),
      },
      rows: 'one',
      expect: [201],
      check: createdRecord,
    },
    bulk: {
      name: 'baseline.bulk100',
      request: {
        method: 'POST',
        path: '/records/bulk',
        headers: JSON_TYPE,
        next: () => ({ body: bodies.bulk() }),
      },
      rows: 'accepted',
      connections: bulkConnections,
      expect: [200],
      check: (body) => (body?.accepted === 100 ? undefined : 'not all 100 accepted'),
    },
  };
}

export interface ServiceFixtures {
  apiKey: string;
  bulkConnections: number;
  /** Records made during setup, for reads and notes. */
  ids: string[];
  emails: string[];
  /** Learns each stage move's record, its `crm.entered_at` and when its answer arrived (crm.stage_move). */
  onMoved?: (recordId: string, enteredAt: string, answeredAt: number) => void;
  /** Counts a stage move's 200 that moved nothing (the record was in that stage already). */
  onStayed?: () => void;
}

export type ServiceScenarioName =
  | 'intake.single'
  | 'intake.idempotent'
  | 'intake.bulk100'
  | 's1.intake.form'
  | 'records.get'
  | 'notes.by_email'
  | 'crm.stage_move';

/**
 * Single-record intake into an account with one account webhook subscribed to `record.created`:
 * the load of `intake.single`; `onCreated` learns each created record's id when its answer arrives.
 */
export function webhookIntakeScenario(
  bodies: Bodies,
  apiKey: string,
  onCreated: (recordId: string, answeredAt: number) => void,
): Scenario {
  return {
    name: 'intake.webhook',
    request: {
      method: 'POST',
      path: '/api/v1/records',
      headers: { authorization: `Bearer ${apiKey}`, ...JSON_TYPE },
      next: () => ({ body: bodies.record() }),
    },
    rows: 'one',
    expect: [201],
    check: createdRecord,
    onResponse: (status, body) => {
      if (status !== 201) return;
      const answeredAt = Date.now();
      const id = (JSON.parse(body) as { id?: unknown }).id;
      if (typeof id === 'string') onCreated(id, answeredAt);
    },
  };
}

export function serviceScenarios(
  bodies: Bodies,
  fixtures: ServiceFixtures,
): Record<ServiceScenarioName, Scenario> {
  const auth = { authorization: `Bearer ${fixtures.apiKey}` };
  let readCursor = 0;
  let noteCursor = 0;
  let moveCursor = 0;
  return {
    // Setup records start in New; each one then goes Won, Contacted, Won, … so that every move is
    // a real move into a stage with one webhook automation (run.ts configures them and a receiver).
    'crm.stage_move': {
      name: 'crm.stage_move',
      request: {
        method: 'POST',
        path: '/api/v1/crm/records',
        headers: { ...auth, ...JSON_TYPE },
        next: () => {
          const n = moveCursor++;
          const id = fixtures.ids[n % fixtures.ids.length];
          const stage = Math.floor(n / fixtures.ids.length) % 2 === 0 ? 'Won' : 'Contacted';
          return { path: `/api/v1/crm/records/${id}/stage`, body: JSON.stringify({ stage }) };
        },
      },
      rows: 'one',
      expect: [200],
      check: (body) => (body?.previous && body.previous !== body.crm?.stage ? undefined : 'not a move'),
      onResponse: (status, body) => {
        if (status !== 200 || !fixtures.onMoved) return;
        const answeredAt = Date.now();
        const answer = JSON.parse(body) as {
          id?: unknown;
          previous?: unknown;
          crm?: { stage?: unknown; entered_at?: unknown };
        };
        // A record already in the asked stage answers 200 with its earlier entered_at and runs no
        // automation: autocannon takes a request's path when it prepares it, so the requests it
        // abandons at the end of a warm-up leave their records a cycle behind the cursor.
        if (answer.previous === answer.crm?.stage) {
          fixtures.onStayed?.();
          return;
        }
        if (typeof answer.id === 'string' && typeof answer.crm?.entered_at === 'string') {
          fixtures.onMoved(answer.id, answer.crm.entered_at, answeredAt);
        }
      },
    },
    'intake.single': {
      name: 'intake.single',
      request: {
        method: 'POST',
        path: '/api/v1/records',
        headers: { ...auth, ...JSON_TYPE },
        next: () => ({ body: bodies.record() }),
      },
      rows: 'one',
      expect: [201],
      check: (body, sent) => {
        const expected = sent?.includes('"utm_id"') ? 5 : 0;
        return (
          createdRecord(body) ??
          (body.warnings.filter((w: { reason: string }) => w.reason === 'unmapped').length === expected
            ? undefined
            : `expected ${expected} unmapped warnings`)
        );
      },
    },
    'intake.idempotent': {
      name: 'intake.idempotent',
      request: {
        method: 'POST',
        path: '/api/v1/records',
        headers: { ...auth, ...JSON_TYPE },
        next: () => ({ body: bodies.record(true) }),
      },
      rows: 'one',
      expect: [201],
      check: createdRecord,
    },
    'intake.bulk100': {
      name: 'intake.bulk100',
      request: {
        method: 'POST',
        path: '/api/v1/records/bulk',
        headers: { ...auth, ...JSON_TYPE },
        next: () => ({ body: bodies.bulk() }),
      },
      rows: 'accepted',
      connections: fixtures.bulkConnections,
      expect: [200],
      check: (body) => (body?.accepted === 100 ? undefined : 'not all 100 accepted'),
    },
    's1.intake.form': {
      name: 's1.intake.form',
      request: {
        method: 'POST',
        path: '/api/intake',
        headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
        next: () => ({ body: bodies.s1Form() }),
      },
      rows: 'one',
      expect: [200],
      check: (body) => (body?.status === 'success' ? undefined : 'not a success'),
    },
    'records.get': {
      name: 'records.get',
      request: {
        method: 'GET',
        path: '/api/v1/records',
        headers: auth,
        next: () => ({ path: `/api/v1/records/${fixtures.ids[readCursor++ % fixtures.ids.length]}` }),
      },
      rows: 'one',
      expect: [200],
      check: (body) => (typeof body?.fields?.email === 'string' ? undefined : 'no record'),
    },
    'notes.by_email': {
      name: 'notes.by_email',
      request: {
        method: 'POST',
        path: '/api/v1/notes',
        headers: { ...auth, ...JSON_TYPE },
        // Upper-cased: the look-up is case-insensitive (interface: POST /api/v1/notes).
        next: () => ({
          body: JSON.stringify({
            email: fixtures.emails[noteCursor++ % fixtures.emails.length]!.toUpperCase(),
            body: 'Called back, wants an offer by Friday.',
            kind: 'call',
          }),
        }),
      },
      rows: 'one',
      expect: [201],
      check: (body) => (typeof body?.record_id === 'string' ? undefined : 'no note'),
    },
  };
}
