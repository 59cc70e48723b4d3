import { loadConfig } from '../config.ts';
import { DataDirLockedError, openDatabase } from '../db/client.ts';
import { migrate } from '../db/migrate.ts';
import { serveUntilSignal } from '../start/server.ts';
import { runWorkerUntilSignal } from '../start/worker.ts';
import { type CliIo, HTTP_COMMANDS, runHttpCommand } from './http-commands.ts';

const USAGE = `Usage: leads <command> [options]

Service:
  serve                  start the HTTP server (and the workers, unless LEADS_RUN_WORKERS=false)
  worker                 run the background workers alone (PostgreSQL; the embedded database
                         admits one process, so there the workers run inside serve)
  migrate                bring the database schema up to date

Clients of a running service (--url, default $LEADS_URL or http://127.0.0.1:3000;
--key or $LEADS_API_KEY; --admin-token or $LEADS_ADMIN_TOKEN; --json prints the raw answer):
${Object.values(HTTP_COMMANDS)
  .map((spec) => `  ${spec.usage}`)
  .join('\n')}
`;

async function runMigrate(io: CliIo): Promise<number> {
  const config = loadConfig(io.env);
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: 2,
  });
  try {
    const { applied } = await migrate(database.db);
    io.out(applied.length === 0 ? 'the schema is up to date\n' : `applied: ${applied.join(', ')}\n`);
    return 0;
  } finally {
    await database.close();
  }
}

export async function main(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'serve':
        await serveUntilSignal(loadConfig(io.env));
        return 0;
      case 'worker':
        await runWorkerUntilSignal(loadConfig(io.env));
        return 0;
      case 'migrate':
        return await runMigrate(io);
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        io.out(USAGE);
        return 0;
      default: {
        const name = `${command} ${rest[0] ?? ''}`.trim();
        if (HTTP_COMMANDS[name]) return await runHttpCommand(name, rest.slice(1), io);
        io.err(`leads: unknown command "${name}"\n\n${USAGE}`);
        return 2;
      }
    }
  } catch (error) {
    if (error instanceof DataDirLockedError) {
      io.err(`leads: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

function defaultIo(): CliIo {
  return {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    env: process.env,
  };
}
