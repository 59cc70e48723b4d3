import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);

/**
 * A process that starts the job queue with the maintenance schedules (what every `serve` and
 * `worker` does) and works it, with Intl.DateTimeFormat counted: the first one makes V8 read ICU's
 * locale data out of the Node binary, about 7 MB of resident memory for the life of the process
 * (src/jobs/queue.ts). Run in a child process, since the test runner itself uses Intl.
 */
const PROGRAM = `
let formats = 0;
Intl.DateTimeFormat = new Proxy(Intl.DateTimeFormat, {
  construct(target, args) { formats++; return Reflect.construct(target, args); },
  apply(target, self, args) { formats++; return Reflect.apply(target, self, args); },
});
const root = ${JSON.stringify(pathToFileURL(`${ROOT}/`).href)};
const { openDatabase } = await import(root + 'src/db/client.ts');
const { migrate } = await import(root + 'src/db/migrate.ts');
const { createJobQueue } = await import(root + 'src/jobs/queue.ts');
const { registerMaintenanceJobs } = await import(root + 'src/jobs/maintenance.jobs.ts');
const pino = (await import('pino')).default;
const database = await openDatabase({ databaseUrl: undefined, dataDir: '', poolSize: 1, inMemory: true });
await migrate(database.db);
const queue = createJobQueue(database, { logger: pino({ level: 'silent' }), pollingIntervalSeconds: 0.5 });
registerMaintenanceJobs(queue, database.db);
await queue.start({ work: true });
const schedules = await database.db.selectFrom('pgboss.schedule').select('name').execute();
await queue.stop(1_000);
await database.close();
process.stdout.write(JSON.stringify({ formats, schedules: schedules.map((row) => row.name).sort() }));
`;

describe('the job queue and ICU locale data', () => {
  it('starts and schedules the maintenance jobs without building an Intl.DateTimeFormat', async () => {
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', PROGRAM], {
      cwd: ROOT,
      timeout: 60_000,
    });
    const answer = JSON.parse(stdout) as { formats: number; schedules: string[] };
    // The schedules were checked and written (pg-boss parses each cron expression to do so).
    expect(answer.schedules).toEqual([
      'maintenance.purge-automation-runs',
      'maintenance.purge-idempotency-keys',
    ]);
    expect(answer.formats).toBe(0);
  });
});
