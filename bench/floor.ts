/**
 * The storage floor of bulk intake (`npm run bench`): what the service writes for a 100-record
 * bulk call, the 100 record rows of the bench entity and the call's one intake-log entry listing
 * each entry's outcome, into the service's own tables (the real schema, indexes and foreign
 * keys), by a client with no server in between. Each call is one prepared statement, its rows
 * generated inside the database (as pgbench would: no parameter parsing, no JSON), run back to
 * back for `seconds`. Rows look like bench/seed.ts's, with time-ordered ids as the service's
 * (migration 0021).
 *
 * PostgreSQL: `connections` connections of their own, the backends' CPU counted.
 * Embedded database: it admits one process and has one session, so the floor runs in a child
 * process of its own (`node <the start script's flags> bench/floor.ts <options as JSON>`, with the
 * service stopped), opening the service's data directory as the service does (src/db/client.ts:
 * same settings, same prepared-statement path) and running the calls one after the other; the
 * child's own CPU is counted, which is PGlite's work and the loop's.
 */
import { pathToFileURL } from 'node:url';
import { CompiledQuery } from 'kysely';
import pg from 'pg';
import { openDatabase } from '../src/db/client.ts';
import { PREPARED_MARK } from '../src/db/prepared.ts';

export interface FloorResult {
  connections: number;
  calls: number;
  seconds: number;
  callsPerSecond: number;
  rowsPerSecond: number;
  p50: number;
  p99: number;
  /** CPU the connections' backends (embedded: the floor's process) used, ms per record row. */
  databaseCpuMsPerRow: number | null;
}

/** What the embedded floor's child process is told, as JSON in its one argument. */
export interface EmbeddedFloorOptions {
  dataDir: string;
  accountId: string;
  entityKey: string;
  seconds: number;
  tag: string;
}

const CALL_SIZE = 100;

const STATEMENT = `
  WITH v AS (
    SELECT n,
      (ARRAY['Ada','Bo','Cyra','Dan','Eva','Finn','Greta','Hugo'])[1 + n % 8] AS first_name,
      'Floor' || n AS last_name,
      'Lead.' || $7::text || '.' || n || '@Floor.example' AS email,
      '+49 30 ' || (1000000 + n % 9000000) AS phone,
      CASE WHEN n % 3 = 0 THEN NULL ELSE 'Company ' || (n % 500) || ' GmbH' END AS company,
      (ARRAY['Solar','Heat pump','Battery'])[1 + n % 3] AS interest,
      5000 + (n % 40) * 500 AS budget, n % 2 = 0 AS consent,
      to_char(date '2027-01-01' + (n % 365)::int, 'YYYY-MM-DD') AS move_in,
      'Please call me in the morning about an offer for our house.' AS message
    FROM generate_series($3::bigint, $3::bigint + ${CALL_SIZE - 1}) AS n
  ), ins AS (
    INSERT INTO records (account_id, id, entity_id, name, fields, source, origin, email_lc, dedupe_key,
      dedupe_unique, pipeline_id, stage_id, stage_entered_at, created_by)
    SELECT $1::uuid, time_ordered_uuid(), $2::uuid, v.first_name || ' ' || v.last_name,
      jsonb_strip_nulls(jsonb_build_object(
        'first_name', v.first_name, 'last_name', v.last_name, 'email', v.email, 'phone', v.phone,
        'company', v.company, 'interest', v.interest, 'budget', v.budget, 'consent', v.consent,
        'move_in', v.move_in, 'message', v.message)),
      'api', '{}'::jsonb, lower(v.email), lower(v.email), $4::boolean, $5::uuid, $6::uuid,
      CASE WHEN $6::uuid IS NULL THEN NULL ELSE now() END, $8::text
    FROM v ORDER BY n
    RETURNING id
  ), log_entry AS (
    INSERT INTO intake_log (account_id, id, request_id, endpoint, outcome, status_code, entity_key, source,
      warnings, items)
    SELECT $1::uuid, time_ordered_uuid(), 'floor-' || $3::bigint, '/api/v1/records/bulk', 'bulk', 200, 'lead', 'api',
      '[]'::jsonb, jsonb_agg(jsonb_build_object('index', i, 'status', 'created', 'record_id', id) ORDER BY i)
    FROM (SELECT id, row_number() OVER () - 1 AS i FROM ins) AS o
  )
  SELECT count(*)::int AS written FROM ins`;

/** The first stage of the entity's first pipeline, where intake puts a new record. */
const STAGE_QUERY = `SELECT p.id AS pipeline_id, s.id AS stage_id FROM pipelines p
  JOIN stages s ON s.account_id = p.account_id AND s.pipeline_id = p.id
  WHERE p.account_id = $1 AND p.entity_id = $2 AND NOT p.archived AND NOT s.archived
  ORDER BY p.position, s.position LIMIT 1`;

/** Reads rows of a query with `$n` parameters; each floor runs it through its own client. */
type Query = <Row>(text: string, values: unknown[]) => Promise<Row[]>;

/**
 * The floor statement's parameters but the first row number: the account, the entity, whether
 * its duplicate rule makes the key unique, the first stage, the run's tag, and the creator.
 */
async function floorParameters(
  query: Query,
  options: { accountId: string; entityKey: string; tag: string },
): Promise<(start: number) => unknown[]> {
  const [entity] = await query<{ id: string; duplicate_rule: { action?: string } | null }>(
    'SELECT id, duplicate_rule FROM entities WHERE account_id = $1 AND key = $2',
    [options.accountId, options.entityKey],
  );
  if (!entity) throw new Error('floor: no entity');
  const action = entity.duplicate_rule?.action;
  const dedupeUnique = action === 'update' || action === 'ignore';
  const [stage] = await query<{ pipeline_id: string; stage_id: string }>(STAGE_QUERY, [
    options.accountId,
    entity.id,
  ]);
  // The creator the service writes for a call with the account's key (history actor `api:<name>`).
  const [key] = await query<{ name: string }>(
    'SELECT name FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL ORDER BY created_at LIMIT 1',
    [options.accountId],
  );
  if (!key) throw new Error('floor: no API key');
  return (start) => [
    options.accountId,
    entity.id,
    start,
    dedupeUnique,
    stage?.pipeline_id ?? null,
    stage?.stage_id ?? null,
    options.tag,
    `api:${key.name}`,
  ];
}

function cpuMsOf(pid: number, ticksPerSecond: number, cpuTicksOf: (pid: number) => number): number {
  return (cpuTicksOf(pid) * 1000) / ticksPerSecond;
}

export async function measureBulkFloor(options: {
  databaseUrl: string;
  accountId: string;
  entityKey: string;
  connections: number;
  seconds: number;
  tag: string;
  /** Reads a process's CPU ticks (scenarios.ts), for the backends' CPU. */
  cpuTicksOf: (pid: number) => number;
  ticksPerSecond: number;
}): Promise<FloorResult> {
  const clients = Array.from({ length: options.connections }, () => new pg.Client(options.databaseUrl));
  try {
    await Promise.all(clients.map((client) => client.connect()));
    const first = clients[0]!;
    const parameters = await floorParameters(
      async <Row>(text: string, values: unknown[]) => (await first.query(text, values)).rows as Row[],
      options,
    );
    const pids = await Promise.all(
      clients.map(
        async (client) =>
          (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid,
      ),
    );
    const cpuBefore = pids.map((pid) => cpuMsOf(pid, options.ticksPerSecond, options.cpuTicksOf));
    const latencies: number[] = [];
    const started = performance.now();
    const deadline = started + options.seconds * 1000;
    await Promise.all(
      clients.map(async (client, index) => {
        let call = 0;
        while (performance.now() < deadline) {
          const at = performance.now();
          await client.query({
            name: 'bench_bulk_floor',
            text: STATEMENT,
            values: parameters(index * 1_000_000_000 + call * CALL_SIZE),
          });
          latencies.push(performance.now() - at);
          call++;
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const cpuMs = pids.reduce(
      (sum, pid, index) => sum + cpuMsOf(pid, options.ticksPerSecond, options.cpuTicksOf) - cpuBefore[index]!,
      0,
    );
    return floorResult(options.connections, latencies, seconds, cpuMs);
  } finally {
    await Promise.all(clients.map((client) => client.end().catch(() => {})));
  }
}

function floorResult(connections: number, latencies: number[], seconds: number, cpuMs: number): FloorResult {
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (q: number) =>
    Math.round(sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0);
  const calls = latencies.length;
  return {
    connections,
    calls,
    seconds: Math.round(seconds * 10) / 10,
    callsPerSecond: Math.round(calls / seconds),
    rowsPerSecond: Math.round((calls * CALL_SIZE) / seconds),
    p50: at(0.5),
    p99: at(0.99),
    databaseCpuMsPerRow: calls > 0 ? Math.round((cpuMs / (calls * CALL_SIZE)) * 1000) / 1000 : null,
  };
}

/** The embedded floor, in this process (the child the bench starts; see the file's comment). */
async function measureEmbeddedFloor(options: EmbeddedFloorOptions): Promise<FloorResult> {
  const database = await openDatabase({ databaseUrl: undefined, dataDir: options.dataDir, poolSize: 1 });
  try {
    const query: Query = async <Row>(text: string, values: unknown[]) => [
      ...(await database.db.executeQuery<Row>(CompiledQuery.raw(text, values))).rows,
    ];
    const parameters = await floorParameters(query, options);
    // Prepared in the one embedded session, as the service's marked statements are.
    const text = `${STATEMENT}\n${PREPARED_MARK}`;
    const latencies: number[] = [];
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const deadline = started + options.seconds * 1000;
    for (let call = 0; performance.now() < deadline; call++) {
      const at = performance.now();
      await query(text, parameters(call * CALL_SIZE));
      latencies.push(performance.now() - at);
    }
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    return floorResult(1, latencies, seconds, (cpu.user + cpu.system) / 1000);
  } finally {
    await database.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = JSON.parse(process.argv[2] ?? '') as EmbeddedFloorOptions;
  process.stdout.write(`${JSON.stringify(await measureEmbeddedFloor(options))}\n`);
}
