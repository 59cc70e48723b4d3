import { readFileSync } from 'node:fs';
import path from 'node:path';
import { type Config, loadConfig } from '../config.ts';
import {
  type CliIo,
  EXIT_FAILED,
  EXIT_USAGE,
  groupUsage,
  HTTP_COMMANDS,
  runHttpCommand,
} from './http-commands.ts';

// The service commands load the server, the database drivers and the job queue only when run
// (dynamic imports below), so that the client commands and --help start in a blink.
const SERVICE_COMMANDS: Record<string, { summary: string; run(config: Config, io: CliIo): Promise<number> }> =
  {
    serve: {
      summary: 'start the HTTP server (and the workers, unless LEADS_RUN_WORKERS=false)',
      async run(config) {
        const { serveUntilSignal } = await import('../start/server.ts');
        await serveUntilSignal(config);
        return 0;
      },
    },
    worker: {
      summary:
        'run the background workers alone (PostgreSQL; the embedded database\n' +
        '                         admits one process, so there the workers run inside serve)',
      async run(config) {
        const { runWorkerUntilSignal } = await import('../start/worker.ts');
        await runWorkerUntilSignal(config);
        return 0;
      },
    },
    migrate: {
      summary: 'bring the database schema up to date and print what was applied',
      async run(config, io) {
        const [{ openDatabase }, { migrate }] = await Promise.all([
          import('../db/client.ts'),
          import('../db/migrate.ts'),
        ]);
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
      },
    },
  };

const USAGE = `Usage: leads <command> [options]

Service (settings come from the environment: PORT, DATABASE_URL, LEADS_DATA_DIR, …; see README):
${Object.entries(SERVICE_COMMANDS)
  .map(([name, spec]) => `  ${name.padEnd(23)}${spec.summary}`)
  .join('\n')}

Clients of a running service (--url, default $LEADS_URL or http://127.0.0.1:3000;
--key or $LEADS_API_KEY; --admin-token or $LEADS_ADMIN_TOKEN; the environment keeps secrets out
of the process list; --json prints the raw answer; <command> --help shows one command,
<group> --help the actions of a group such as keys; leads help <command or group> the same):
${Object.values(HTTP_COMMANDS)
  .map((spec) => `  ${spec.usage}`)
  .join('\n')}

  leads --version          print the version
`;

/** The lock file of an embedded data directory (src/db/client.ts takes it). */
const LOCK_FILE_NAME = 'leads.lock';

/**
 * The one-line reason of a failure the operator can act on (port taken, database unreachable,
 * wrong password, unreadable directory): errors that carry a system or SQLSTATE code. Anything
 * else is a defect and keeps its stack trace.
 */
function operationalReason(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string' || code.startsWith('ERR_')) return undefined;
  // A refused connection tried on several addresses is an AggregateError with an empty message.
  const message =
    error.message ||
    (error instanceof AggregateError ? error.errors.map((e) => (e as Error).message).join('; ') : '');
  if (message === '') return code;
  return message.includes(code) ? message : `${message} (${code})`;
}

async function runServiceCommand(name: string, args: string[], io: CliIo): Promise<number> {
  const spec = SERVICE_COMMANDS[name]!;
  if (args.includes('--help') || args.includes('-h')) {
    io.out(`usage: leads ${name}\n  ${spec.summary}\nSettings come from the environment; see README.\n`);
    return 0;
  }
  if (args.length > 0) {
    io.err(
      `leads ${name}: unexpected argument "${args[0]}"; settings come from the environment (PORT, DATABASE_URL, LEADS_DATA_DIR, …)\n`,
    );
    return EXIT_USAGE;
  }
  let config: Config;
  try {
    config = loadConfig(io.env);
  } catch (error) {
    io.err(`leads ${name}: ${(error as Error).message}\n`);
    return EXIT_USAGE;
  }
  const { DataDirLockedError } = await import('../db/client.ts');
  try {
    return await spec.run(config, io);
  } catch (error) {
    if (error instanceof DataDirLockedError) {
      const lockFile = path.join(config.dataDir, LOCK_FILE_NAME);
      io.err(
        `leads ${name}: ${error.message}\n` +
          `The lock file is ${lockFile}; delete it only if that pid is not a Leadline process.\n`,
      );
      return EXIT_FAILED;
    }
    const reason = operationalReason(error);
    if (reason === undefined) throw error;
    io.err(`leads ${name}: ${reason}\n`);
    return EXIT_FAILED;
  }
}

function version(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return manifest.version;
}

/**
 * `leads <group>` followed by no action, `--help` or `-h`, or a word that is no action: help
 * prints the group's actions (exit 0), the others print them as a usage error (exit 2).
 */
function groupWithoutAction(group: string, usages: string[], next: string | undefined, io: CliIo): number {
  const lines = usages.map((usage) => `  ${usage}`).join('\n');
  if (next === '--help' || next === '-h') {
    io.out(`usage:\n${lines}\n`);
    return 0;
  }
  const action = next === undefined ? 'needs an action' : `has no action "${next}"`;
  io.err(`leads ${group} ${action}:\n${lines}\n`);
  return EXIT_USAGE;
}

/**
 * `leads help WORDS` (or `--help WORDS`): the help of the command or group WORDS name, as
 * `leads WORDS --help` prints it. Words that name neither are a usage error, not ignored.
 */
function helpOf(words: string[], io: CliIo): Promise<number> {
  const name = words.join(' ');
  // Each word a plain one, so that "keys create" given as one argument is no command either.
  const known =
    words.every((word) => /^[a-z][a-z-]*$/.test(word)) &&
    ((words.length === 1 && SERVICE_COMMANDS[name] !== undefined) ||
      HTTP_COMMANDS[name] !== undefined ||
      groupUsage(name).length > 0);
  if (!known) {
    io.err(`leads help: no command or group "${name}"\n\n${USAGE}`);
    return Promise.resolve(EXIT_USAGE);
  }
  return main([...words, '--help'], io);
}

export async function main(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      if (rest.length > 0) return helpOf(rest, io);
      io.out(USAGE);
      return 0;
    case '--version':
    case '-v':
      if (rest.length > 0) {
        io.err(`leads ${command}: unexpected argument "${rest[0]}"\n`);
        return EXIT_USAGE;
      }
      io.out(`leads ${version()}\n`);
      return 0;
  }
  if (SERVICE_COMMANDS[command]) return runServiceCommand(command, rest, io);
  // Commands are two words (`keys list`) or three (`distribution rules set`).
  const three = `${command} ${rest[0] ?? ''} ${rest[1] ?? ''}`;
  if (HTTP_COMMANDS[three]) return runHttpCommand(three, rest.slice(2), io);
  const name = `${command} ${rest[0] ?? ''}`.trim();
  if (HTTP_COMMANDS[name]) return runHttpCommand(name, rest.slice(1), io);
  const subgroup = rest[0] === undefined ? [] : groupUsage(name);
  if (subgroup.length > 0) return groupWithoutAction(name, subgroup, rest[1], io);
  const group = groupUsage(command);
  if (group.length > 0) return groupWithoutAction(command, group, rest[0], io);
  io.err(`leads: unknown command "${command}"\n\n${USAGE}`);
  return EXIT_USAGE;
}

function defaultIo(): CliIo {
  return {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    env: process.env,
  };
}
