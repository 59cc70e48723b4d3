import { afterAll, beforeAll } from 'vitest';
import { createPostgresDatabase } from '../helpers/databases.ts';

/**
 * A PostgreSQL database of its own for the tests of one `describe`: made before them, dropped
 * after. Returns its URL, read once the database exists.
 */
export function usePostgresDatabase(): () => string {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>> | undefined;
  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });
  return () => {
    if (!database) throw new Error('the database is made before the tests');
    return database.url;
  };
}

/**
 * Program text for `runProgram` that opens the
 * service's runtime on a PostgreSQL database as `leads serve` does, without workers, and closes
 * it again: what the runtime sets up for the process stays.
 */
export function openRuntimeOnPostgres(databaseUrl: string): string {
  return `
const { loadConfig } = await import(root + 'src/config.ts');
const { openRuntime } = await import(root + 'src/start/runtime.ts');
const config = loadConfig({ DATABASE_URL: ${JSON.stringify(databaseUrl)} });
const runtime = await openRuntime(config, { logger: { info() {}, warn() {}, error() {} }, works: false });
await runtime.database.close();
`;
}
