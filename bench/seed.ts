/**
 * Growth seeding for `BENCH_GROWTH=1`: many records written straight into the `records` table of
 * one account with multi-row `INSERT … SELECT generate_series`, far faster than intake could.
 *
 * The rows look like what intake writes for the bench entity (see intake.service.ts newRecordRow
 * and records/field-values.ts): `fields` holds the stored values (trimmed text, numbers, booleans,
 * dates as YYYY-MM-DD, the select option's spelling; empty values left out), `name` is first name
 * + last name, `email_lc` the lower-cased email, `dedupe_key` the lower-cased trimmed values of
 * the duplicate rule's fields joined by U+001F (one field here: the email), `dedupe_unique` true
 * under an `update` rule, the id is time-ordered (`time_ordered_uuid(created_at)`, migration 0021,
 * as intake's ids are), and the record sits in the first stage of the entity's first pipeline.
 * Emails are unique and never collide with the bench's own (`…@seed.example`). History rows
 * (events, stage history, intake log) are not seeded: the growth run measures the record look-ups
 * (duplicate rule, email) and inserts against a large `records` table.
 *
 * The same number of stored idempotency answers goes into `idempotency_keys` (the scope of
 * `POST /api/v1/records`, done, unexpired), so that idempotent intake is measured against a
 * table of that size as well: its claims insert into the table's unique index.
 */
import { sql } from 'kysely';
import { openDatabase } from '../src/db/client.ts';
import { RECORD_SCOPE } from '../src/modules/intake/intake.api.ts';

export interface SeedTarget {
  /** PostgreSQL connection string, or undefined for the embedded database in `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
  accountId: string;
  entityKey: string;
  rows: number;
  /** Makes the seeded emails and idempotency keys unique to this run. */
  tag: string;
}

const BATCH = 50_000;

export async function seedRecords(
  target: SeedTarget,
  log: (line: string) => void,
): Promise<{ seconds: number }> {
  const started = Date.now();
  // The embedded database admits one process: the service must be stopped (openDatabase takes the lock).
  const database = await openDatabase({
    databaseUrl: target.databaseUrl,
    dataDir: target.dataDir,
    poolSize: 1,
  });
  try {
    const { db } = database;
    const entity = await db
      .selectFrom('entities')
      .select(['id', 'duplicate_rule'])
      .where('account_id', '=', target.accountId)
      .where('key', '=', target.entityKey)
      .executeTakeFirstOrThrow();
    const rule = entity.duplicate_rule as { match: string[]; action: string } | null;
    if (rule?.match.length !== 1 || rule.match[0] !== 'email') {
      throw new Error('the seed computes dedupe_key for a duplicate rule on email only');
    }
    const dedupeUnique = rule.action === 'update' || rule.action === 'ignore';
    const stage = await db
      .selectFrom('pipelines')
      .innerJoin('stages', (join) =>
        join
          .onRef('stages.account_id', '=', 'pipelines.account_id')
          .onRef('stages.pipeline_id', '=', 'pipelines.id'),
      )
      .select(['pipelines.id as pipeline_id', 'stages.id as stage_id'])
      .where('pipelines.account_id', '=', target.accountId)
      .where('pipelines.entity_id', '=', entity.id)
      .where('pipelines.archived', '=', false)
      .where('stages.archived', '=', false)
      .orderBy('pipelines.position')
      .orderBy('stages.position')
      .limit(1)
      .executeTakeFirst();

    for (let start = 0; start < target.rows; start += BATCH) {
      const end = Math.min(target.rows, start + BATCH) - 1;
      await sql`
        INSERT INTO records (account_id, id, entity_id, name, fields, source, origin, email_lc, dedupe_key,
          dedupe_unique, pipeline_id, stage_id, stage_entered_at, created_at, updated_at, created_by)
        SELECT ${target.accountId}::uuid, time_ordered_uuid(v.at), ${entity.id}::uuid, v.first_name || ' ' || v.last_name,
          jsonb_strip_nulls(jsonb_build_object(
            'first_name', v.first_name, 'last_name', v.last_name, 'email', v.email, 'phone', v.phone,
            'company', v.company, 'interest', v.interest, 'budget', v.budget, 'consent', v.consent,
            'move_in', v.move_in, 'message', v.message)),
          'api', '{}'::jsonb, lower(v.email), lower(v.email), ${dedupeUnique},
          ${stage?.pipeline_id ?? null}::uuid, ${stage?.stage_id ?? null}::uuid,
          CASE WHEN ${stage?.stage_id ?? null}::uuid IS NULL THEN NULL ELSE v.at END, v.at, v.at, 'api:seed'
        FROM (
          SELECT
            (ARRAY['Ada','Bo','Cyra','Dan','Eva','Finn','Greta','Hugo'])[1 + n % 8] AS first_name,
            'Seed' || n AS last_name,
            CASE WHEN n % 3 = 0 THEN 'Seed.' ELSE 'seed.' END || ${target.tag}::text || '.' || n || '@Seed.example' AS email,
            '+49 30 ' || (1000000 + n % 9000000) AS phone,
            CASE WHEN n % 3 = 0 THEN NULL ELSE 'Company ' || (n % 5000) || ' GmbH' END AS company,
            (ARRAY['Solar','Heat pump','Battery'])[1 + n % 3] AS interest,
            5000 + (n % 40) * 500 AS budget,
            n % 2 = 0 AS consent,
            to_char(date '2027-01-01' + (n % 365), 'YYYY-MM-DD') AS move_in,
            'Please call me in the morning about an offer for our house.' AS message,
            now() - make_interval(secs => n * 30) AS at
          FROM generate_series(${start}::int, ${end}::int) AS n
        ) AS v`.execute(db);
      const done = end + 1;
      const seconds = (Date.now() - started) / 1000;
      log(
        `  seeded ${done.toLocaleString('en')} of ${target.rows.toLocaleString('en')} records (${Math.round(done / seconds)} rows/s)`,
      );
    }
    for (let start = 0; start < target.rows; start += BATCH) {
      const end = Math.min(target.rows, start + BATCH) - 1;
      await sql`
        INSERT INTO idempotency_keys (account_id, scope, key, request_hash, state, status_code, response,
          lease_until, created_at, expires_at)
        SELECT ${target.accountId}::uuid, ${RECORD_SCOPE}, 'seed-' || ${target.tag}::text || '-' || n,
          md5(n::text), 'done', 201, jsonb_build_object('id', gen_random_uuid(), 'status', 'created'),
          now(), now() - make_interval(secs => n % 86400), now() + interval '1 day'
        FROM generate_series(${start}::int, ${end}::int) AS n`.execute(db);
      const done = end + 1;
      if (done % 250_000 === 0 || done === target.rows) {
        log(`  seeded ${done.toLocaleString('en')} of ${target.rows.toLocaleString('en')} idempotency keys`);
      }
    }
    // Settled statistics and visibility map, so that the measured run neither plans on an empty
    // table nor races autovacuum.
    await sql`VACUUM ANALYZE records, idempotency_keys`.execute(db);
    // The seed and the vacuum leave about a gigabyte of WAL and dirty pages behind; a checkpoint
    // now writes them out, so that the measured run does not share the machine with the spread
    // checkpoint of the seed (which PostgreSQL would otherwise run for minutes afterwards).
    await sql`CHECKPOINT`.execute(db);
  } finally {
    await database.close();
  }
  return { seconds: Math.round((Date.now() - started) / 100) / 10 };
}
