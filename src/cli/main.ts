import { loadConfig } from '../config.ts';
import { DataDirLockedError } from '../db/client.ts';
import { serveUntilSignal } from '../start/server.ts';

const USAGE = `Usage: leads <command>

  serve      start the HTTP server (and the workers, unless LEADS_RUN_WORKERS=false)
  worker     run the background workers alone
  migrate    bring the database schema up to date
`;

export async function main(argv: string[]): Promise<number> {
  const [command] = argv;
  try {
    switch (command) {
      case 'serve':
        await serveUntilSignal(loadConfig());
        return 0;
      default:
        process.stderr.write(USAGE);
        return command === undefined || command === 'help' || command === '--help' ? 0 : 2;
    }
  } catch (error) {
    if (error instanceof DataDirLockedError) {
      process.stderr.write(`leads: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}
