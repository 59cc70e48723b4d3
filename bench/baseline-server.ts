/**
 * The baseline: the least a server can do for a single-record intake on this machine — Fastify
 * with a TypeBox-validated body and one INSERT into the same database with the same pool size —
 * and one multi-row INSERT of 100 rows for bulk. Started as its own process, like the service.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import pg from 'pg';
import { Type } from 'typebox';

const port = Number(process.env.PORT ?? 3100);
const databaseUrl = process.env.DATABASE_URL;
const poolSize = Number(process.env.DATABASE_POOL_SIZE ?? 10);

type Query = (text: string, values: unknown[]) => Promise<unknown>;
let query: Query;
if (databaseUrl) {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
  query = (text, values) => pool.query(text, values);
} else {
  const pglite = await PGlite.create({
    dataDir: path.join(process.env.LEADS_DATA_DIR ?? './bench-baseline', 'pgdata'),
  });
  query = (text, values) => pglite.query(text, values);
}
await query(
  'CREATE TABLE IF NOT EXISTS bench_baseline (account_id uuid NOT NULL, id uuid PRIMARY KEY, payload jsonb NOT NULL, created_at timestamptz(3) NOT NULL DEFAULT now())',
  [],
);

const Body = Type.Object(
  {
    entity: Type.String({ minLength: 1, maxLength: 100 }),
    fields: Type.Record(Type.String({ maxLength: 100 }), Type.Unknown(), { maxProperties: 500 }),
    meta: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { additionalProperties: true },
);
const account = randomUUID();
const app = Fastify({ logger: false, bodyLimit: 16 * 1024 * 1024 }).withTypeProvider<TypeBoxTypeProvider>();

app.post('/records', { schema: { body: Body } }, async (request, reply) => {
  const id = randomUUID();
  await query('INSERT INTO bench_baseline (account_id, id, payload) VALUES ($1, $2, $3)', [
    account,
    id,
    JSON.stringify(request.body.fields),
  ]);
  return reply
    .code(201)
    .send({ id, entity: request.body.entity, created: true, updated: false, warnings: [] });
});

app.post(
  '/records/bulk',
  { schema: { body: Type.Object({ records: Type.Array(Body, { maxItems: 100 }) }) } },
  async (request) => {
    const values: unknown[] = [];
    const rows = request.body.records.map((record, index) => {
      values.push(account, randomUUID(), JSON.stringify(record.fields));
      return `($${index * 3 + 1}, $${index * 3 + 2}, $${index * 3 + 3})`;
    });
    await query(`INSERT INTO bench_baseline (account_id, id, payload) VALUES ${rows.join(', ')}`, values);
    return { accepted: rows.length };
  },
);

app.get('/health', async () => ({ status: 'ok' }));
await app.listen({ port, host: '127.0.0.1' });
process.on('SIGTERM', () => {
  app.close().then(() => process.exit(0));
});
