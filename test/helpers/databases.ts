import { randomBytes } from 'node:crypto';
import { openAsBlob } from 'node:fs';
import pg from 'pg';
import { inject } from 'vitest';
import { type DatabaseHandle, type DatabaseKind, openDatabase } from '../../src/db/client.ts';
import { migrate } from '../../src/db/migrate.ts';

/** The databases every suite runs against: TEST_DATABASES=pglite,postgres (both by default). */
export const TEST_DATABASES: DatabaseKind[] = (process.env.TEST_DATABASES ?? 'pglite,postgres')
  .split(',')
  .map((name) => name.trim())
  .filter((name): name is DatabaseKind => name === 'pglite' || name === 'postgres');

/**
 * The one database a browser test of the console runs on. Its subject is the console, a client
 * of the API whose every path is tested on both databases, and a browser test costs 4–14 s; each
 * file names the kind it runs on (the files alternate, so that each database serves the console
 * too), or the first of TEST_DATABASES when that leaves the named one out.
 */
export function oneDatabase(preferred: DatabaseKind): DatabaseKind[] {
  return TEST_DATABASES.includes(preferred) ? [preferred] : TEST_DATABASES.slice(0, 1);
}

/** Server of the machine's PostgreSQL; tests create and drop their own databases on it. */
export const POSTGRES_ADMIN_URL =
  process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  handle: DatabaseHandle;
  /** Connection string for other processes (PostgreSQL only). */
  url: string | undefined;
  drop(): Promise<void>;
}

export function postgresUrlFor(database: string): string {
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

/** A new, empty PostgreSQL database; the caller drops it. */
export async function createPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `leads_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  return {
    url: postgresUrlFor(name),
    async drop() {
      const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

/**
 * A migrated database of the given kind: a fresh PostgreSQL database, or an in-memory PGlite
 * loaded from the run's migrated dump (test/global-setup.ts), migrated again (nothing left to do
 * unless the dump is missing).
 */
export async function createTestDatabase(kind: DatabaseKind): Promise<TestDatabase> {
  if (kind === 'pglite') {
    const dump = inject('migratedEmbeddedDump');
    const handle = await openDatabase({
      databaseUrl: undefined,
      dataDir: '',
      poolSize: 1,
      inMemory: true,
      loadDataDir: dump ? await openAsBlob(dump) : undefined,
    });
    await migrate(handle.db);
    return { handle, url: undefined, drop: () => handle.close() };
  }
  const created = await createPostgresDatabase();
  const handle = await openDatabase({ databaseUrl: created.url, dataDir: '', poolSize: 10 });
  await migrate(handle.db);
  return {
    handle,
    url: created.url,
    async drop() {
      await handle.close();
      await created.drop();
    },
  };
}
