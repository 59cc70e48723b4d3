import fs from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import type { Db } from './types.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
/** Any constant: the advisory lock that serialises migrators on one PostgreSQL database. */
const MIGRATION_LOCK_ID = 7_347_110;

export interface MigrationResult {
  applied: string[];
}

async function listMigrationFiles(): Promise<string[]> {
  const names = await fs.readdir(MIGRATIONS_DIR);
  return names.filter((name) => /^\d{4}_[a-z0-9_]+\.sql$/.test(name)).sort();
}

/**
 * Splits a migration file into statements: a statement ends with a semicolon at the end of a
 * line, outside a dollar-quoted body. PGlite runs one statement per prepared query.
 */
export function splitStatements(text: string): string[] {
  const statements: string[] = [];
  let current: string[] = [];
  let inDollarBody = false;
  for (const line of text.split('\n')) {
    if (line.trimStart().startsWith('--') && current.length === 0) continue;
    current.push(line);
    if ((line.match(/\$\$/g)?.length ?? 0) % 2 === 1) inDollarBody = !inDollarBody;
    if (!inDollarBody && line.trimEnd().endsWith(';')) {
      statements.push(current.join('\n'));
      current = [];
    }
  }
  if (current.join('').trim() !== '') statements.push(current.join('\n'));
  return statements;
}

/**
 * Applies the numbered plain-SQL migrations that have not run yet, all in one transaction, so a
 * failed migration leaves the schema as it was. On PostgreSQL an advisory lock makes concurrent
 * starters wait for each other instead of racing.
 */
export async function migrate(db: Db): Promise<MigrationResult> {
  const files = await listMigrationFiles();
  return db.transaction().execute(async (tx) => {
    await sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`.execute(tx);
    await sql`CREATE TABLE IF NOT EXISTS schema_migrations (
      account_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
      name text NOT NULL,
      applied_at timestamptz(3) NOT NULL DEFAULT now(),
      PRIMARY KEY (account_id, name)
    )`.execute(tx);
    const done = await sql<{ name: string }>`SELECT name FROM schema_migrations`.execute(tx);
    const doneNames = new Set(done.rows.map((row) => row.name));
    const applied: string[] = [];
    for (const file of files) {
      if (doneNames.has(file)) continue;
      const text = await fs.readFile(MIGRATIONS_DIR + file, 'utf8');
      for (const statement of splitStatements(text)) await sql.raw(statement).execute(tx);
      await sql`INSERT INTO schema_migrations (name) VALUES (${file})`.execute(tx);
      applied.push(file);
    }
    return { applied };
  });
}
