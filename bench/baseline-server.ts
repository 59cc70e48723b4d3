/**
 * The baseline of `npm run bench`: the least a server can do for the same single-record intake on
 * this machine. Fastify with a TypeBox schema (like the service) validates the same body, typed to
 * the bench entity's 10 fields, and one INSERT writes the record as a jsonb payload into the same
 * kind of database with the same pool size (pg.Pool of DATABASE_POOL_SIZE, default 10, as the
 * service; PGlite in-process on the embedded run). `POST /records/bulk` writes up to 100 records
 * with one multi-row INSERT. `GET /records/:id` is the bare read: the API key
 * (`BASELINE_API_KEY`, `Authorization: Bearer …`) hashed with SHA-256 as the service hashes it, and
 * checked (unrevoked, with `records:read`) in the one `SELECT` that reads the row by its primary key.
 * Started as its own process, like the service:
 *
 *   PORT=… HOST=127.0.0.1 DATABASE_URL=postgres://… BASELINE_API_KEY=… node bench/baseline-server.ts
 *   PORT=… HOST=127.0.0.1 LEADS_DATA_DIR=/tmp/… BASELINE_API_KEY=… node bench/baseline-server.ts
 */
import { createHash, randomUUID } from 'node:crypto';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import pg from 'pg';
import { Type } from 'typebox';

const port = Number(process.env.PORT ?? 3100);
const host = process.env.HOST ?? '127.0.0.1';
const databaseUrl = process.env.DATABASE_URL || undefined;
const poolSize = Number(process.env.DATABASE_POOL_SIZE ?? 10);

type Query = (text: string, values: unknown[]) => Promise<unknown>;
let query: Query;
let closeDatabase: () => Promise<void>;
if (databaseUrl) {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
  pool.on('error', () => {});
  query = (text, values) => pool.query(text, values);
  closeDatabase = () => pool.end();
} else {
  const dataDir = process.env.LEADS_DATA_DIR;
  if (!dataDir) throw new Error('set DATABASE_URL or LEADS_DATA_DIR');
  const pglite = await PGlite.create({ dataDir: path.join(dataDir, 'pgdata') });
  query = (text, values) => pglite.query(text, values);
  closeDatabase = () => pglite.close();
}
await query(
  `CREATE TABLE IF NOT EXISTS bench_baseline (
     account_id uuid NOT NULL, id uuid NOT NULL, entity text NOT NULL, payload jsonb NOT NULL,
     created_at timestamptz(3) NOT NULL DEFAULT now(), PRIMARY KEY (account_id, id))`,
  [],
);
await query(
  `CREATE TABLE IF NOT EXISTS bench_baseline_keys (
     key_hash bytea PRIMARY KEY, account_id uuid NOT NULL, permissions text[] NOT NULL,
     revoked_at timestamptz(3))`,
  [],
);

const Text = Type.String({ maxLength: 10_000 });
/** The bench entity's fields, typed; other keys pass (the service sets them aside as warnings). */
const Fields = Type.Object(
  {
    first_name: Type.Optional(Text),
    last_name: Type.Optional(Text),
    email: Type.String({ maxLength: 254, pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$' }),
    phone: Type.Optional(Type.String({ pattern: '^\\+?[0-9 ()./-]{5,40}$' })),
    company: Type.Optional(Text),
    interest: Type.Optional(
      Type.Union([Type.Literal('Solar'), Type.Literal('Heat pump'), Type.Literal('Battery')]),
    ),
    budget: Type.Optional(Type.Number()),
    consent: Type.Optional(Type.Boolean()),
    move_in: Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' })),
    message: Type.Optional(Type.String({ maxLength: 100_000 })),
  },
  { additionalProperties: true, maxProperties: 500 },
);
const RecordBody = Type.Object(
  {
    entity: Type.String({ minLength: 1, maxLength: 100 }),
    fields: Fields,
    meta: Type.Optional(Type.Record(Type.String({ maxLength: 100 }), Type.Unknown(), { maxProperties: 50 })),
  },
  { additionalProperties: true, maxProperties: 600 },
);

const account = randomUUID();
const apiKey = process.env.BASELINE_API_KEY;
const hashOf = (secret: string) => createHash('sha256').update(secret, 'utf8').digest();
if (apiKey) {
  await query('INSERT INTO bench_baseline_keys (key_hash, account_id, permissions) VALUES ($1, $2, $3)', [
    hashOf(apiKey),
    account,
    ['records:read'],
  ]);
}
const app = Fastify({
  logger: { level: 'warn' },
  bodyLimit: 16 * 1024 * 1024,
}).withTypeProvider<TypeBoxTypeProvider>();

app.post('/records', { schema: { body: RecordBody } }, async (request, reply) => {
  const id = randomUUID();
  await query('INSERT INTO bench_baseline (account_id, id, entity, payload) VALUES ($1, $2, $3, $4)', [
    account,
    id,
    request.body.entity,
    JSON.stringify(request.body.fields),
  ]);
  return reply
    .code(201)
    .send({ id, entity: request.body.entity, created: true, updated: false, warnings: [] });
});

app.post(
  '/records/bulk',
  { schema: { body: Type.Object({ records: Type.Array(RecordBody, { minItems: 1, maxItems: 100 }) }) } },
  async (request) => {
    const values: unknown[] = [];
    const ids: string[] = [];
    const rows = request.body.records.map((record, index) => {
      const id = randomUUID();
      ids.push(id);
      values.push(account, id, record.entity, JSON.stringify(record.fields));
      const at = index * 4;
      return `($${at + 1}, $${at + 2}, $${at + 3}, $${at + 4})`;
    });
    await query(
      `INSERT INTO bench_baseline (account_id, id, entity, payload) VALUES ${rows.join(', ')}`,
      values,
    );
    return {
      accepted: rows.length,
      rejected: 0,
      results: ids.map((id) => ({ id, entity: 'lead', created: true, updated: false, warnings: [] })),
    };
  },
);

app.get(
  '/records/:id',
  { schema: { params: Type.Object({ id: Type.String({ format: 'uuid' }) }) } },
  async (request, reply) => {
    const header = request.headers.authorization;
    const bearer = typeof header === 'string' ? /^Bearer\s+(\S+)$/i.exec(header)?.[1] : undefined;
    if (!bearer) return reply.code(401).send({ error: 'unauthorized' });
    // The key and the row in one statement: no row is an unknown or revoked key, a row without
    // an id a record that is not the key's account's.
    const result = (await query(
      `SELECT r.id, r.entity, r.payload, r.created_at
       FROM bench_baseline_keys k
       LEFT JOIN bench_baseline r ON r.account_id = k.account_id AND r.id = $2
       WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND 'records:read' = ANY (k.permissions)`,
      [hashOf(bearer), request.params.id],
    )) as { rows: { id: string | null; entity: string; payload: unknown; created_at: Date }[] };
    const row = result.rows[0];
    if (!row) return reply.code(401).send({ error: 'unauthorized' });
    if (!row.id) return reply.code(404).send({ error: 'not_found' });
    return { id: row.id, entity: row.entity, fields: row.payload, created_at: row.created_at.toISOString() };
  },
);

app.get('/health', async () => ({ status: 'ok' }));

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await app.close().catch(() => {});
  await closeDatabase().catch(() => {});
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
await app.listen({ port, host });
