import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import { Kysely, PGliteDialect, PostgresDialect } from 'kysely';
import pg from 'pg';
import { startEmbeddedAutovacuum } from './autovacuum.ts';
import { preparedNameOf } from './prepared.ts';
import type { Db } from './types.ts';

export type DatabaseKind = 'postgres' | 'pglite';

export interface DatabaseHandle {
  db: Db;
  kind: DatabaseKind;
  /** The connection string, for components with a pool of their own (the job queue). */
  url?: string;
  /** The embedded instance, for components that speak to it directly (the job queue). */
  pglite?: PGlite;
  /**
   * Where a failed maintenance pass of the embedded database is reported (see autovacuum.ts);
   * a process with a logger sets its own.
   */
  onMaintenanceError: (error: unknown) => void;
  /** Closes the pool (or the embedded database) and releases the data-directory lock. */
  close(): Promise<void>;
}

export class DataDirLockedError extends Error {
  constructor(lockFile: string, pid: number) {
    super(
      `The embedded database in ${path.dirname(lockFile)} is in use by another process (pid ${pid}). ` +
        'Only one process may open it at a time: stop that process first, or set DATABASE_URL to use PostgreSQL.',
    );
    this.name = 'DataDirLockedError';
  }
}

/**
 * What tells one process from a later one that got the same pid: on Linux the start time in
 * clock ticks since boot (field 22 of /proc/<pid>/stat) and the boot's id; elsewhere (macOS, the
 * BSDs) the start time that `ps` prints. `undefined` when the process does not run; `null` when it
 * runs but this system tells no start time (then only the pid can be judged).
 */
export function processStartIdentity(pid: number): string | null | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count from its end.
    const afterName = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const bootId = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return `linux ${bootId} ${afterName[22 - 3]}`;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' && fs.existsSync('/proc/self/stat')) {
      return undefined;
    }
  }
  if (!processIsAlive(pid)) return undefined;
  try {
    const started = execFileSync('ps', ['-o', 'lstart=', '-p', String(pid)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5_000,
    }).trim();
    return started === '' ? null : `ps ${started.replace(/\s+/g, ' ')}`;
  } catch {
    // `ps` exits 1 for a pid that ended meanwhile, and is missing on some systems.
    return processIsAlive(pid) ? null : undefined;
  }
}

function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether the process that wrote a lock (its pid and, when the system told it, its start identity)
 * still runs. A pid that now belongs to a process started at another time was reused (a container
 * restart gives the same small pids again) and holds nothing.
 */
function lockOwnerRuns(pid: number, identity: string | null): boolean {
  const current = processStartIdentity(pid);
  if (current === undefined) return false;
  if (identity === null || current === null) return true;
  return current === identity;
}

function readLock(lockFile: string): { pid: number; identity: string | null } {
  const [pidLine = '', identityLine = ''] = fs.readFileSync(lockFile, 'utf8').split('\n');
  return { pid: Number.parseInt(pidLine.trim(), 10), identity: identityLine.trim() || null };
}

/**
 * Takes the exclusive lock on an embedded data directory. PGlite has no lock of its own and two
 * processes on one directory corrupt it, so a second opener must fail at once. The lock file
 * holds the owner's pid and its start identity (processStartIdentity); a lock whose owner no
 * longer runs (kill -9), or whose pid now names another process, is taken over.
 * Returns the function that releases it.
 */
export function lockDataDir(dir: string): () => void {
  fs.mkdirSync(dir, { recursive: true });
  const lockFile = path.join(dir, 'leads.lock');
  const ownIdentity = processStartIdentity(process.pid) ?? null;
  const content = ownIdentity === null ? `${process.pid}\n` : `${process.pid}\n${ownIdentity}\n`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      // Written aside and linked into place, so that no reader ever sees a lock without its owner.
      const written = `${lockFile}.${process.pid}`;
      fs.writeFileSync(written, content);
      try {
        fs.linkSync(written, lockFile);
      } finally {
        fs.rmSync(written, { force: true });
      }
      return () => {
        try {
          if (fs.readFileSync(lockFile, 'utf8') === content) fs.unlinkSync(lockFile);
        } catch {
          // Already gone: nothing to release.
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = readLock(lockFile);
      if (
        Number.isInteger(owner.pid) &&
        owner.pid > 0 &&
        owner.pid !== process.pid &&
        lockOwnerRuns(owner.pid, owner.identity)
      ) {
        throw new DataDirLockedError(lockFile, owner.pid);
      }
      // Stale lock of a dead process, of a reused pid, or our own from an unclean close.
      fs.rmSync(lockFile, { force: true });
    }
  }
  throw new Error(`Could not take the lock on ${dir}`);
}

/** Types whose text form is kept as is: bigint (int8) as string would surprise callers, so parse it. */
function configurePgTypes(): void {
  pg.types.setTypeParser(pg.types.builtins.INT8, (value: string) => Number(value));
}

/**
 * Kysely runs every statement as `client.query(text, values)`, which PostgreSQL parses and plans
 * anew each time. Texts marked as prepared (db/prepared.ts) go by name instead: parsed and
 * planned once on this connection, then only bound and executed.
 */
function executeMarkedStatementsByName(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = (...args: unknown[]) => {
    const [text, values] = args;
    if (args.length === 2 && typeof text === 'string' && Array.isArray(values)) {
      const name = preparedNameOf(text);
      if (name) return query({ name, text, values });
    }
    return query(...args);
  };
}

/**
 * PostgreSQL settings of the embedded database, after PGlite's own start parameters (single-user
 * mode and its fixed settings). Whatever PostgreSQL touches of its WebAssembly memory stays
 * resident for the life of the process (the memory never shrinks), so the caches are sized for a
 * small server rather than by PostgreSQL's defaults as PGlite sets them: shared_buffers 160 MB →
 * 64 MB (the pages live in the system's file cache as well), maintenance_work_mem 64 → 16 MB
 * (VACUUM, ANALYZE and index builds of migrations). docs/decisions.md, Runtime and storage, has
 * the measurements.
 */
export const EMBEDDED_SETTINGS: Readonly<Record<string, string>> = Object.freeze({
  shared_buffers: '64MB',
  maintenance_work_mem: '16MB',
});

export interface OpenDatabaseOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  poolSize: number;
  /** Embedded only: keep the database in memory (tests). */
  inMemory?: boolean;
  /**
   * Embedded only: start a new data directory from this dump of one (`PGlite.dumpDataDir`)
   * instead of making it empty. Tests start each database from one dump migrated once a run:
   * loading it takes a fifth of the time a new data directory takes to be made.
   */
  loadDataDir?: Blob;
  /** Embedded only: how often tables are checked for ANALYZE and VACUUM (autovacuum.ts). */
  autovacuumIntervalMs?: number;
}

/** Until a process sets its logger: a warning on stderr, which never stops the process. */
function reportMaintenanceError(error: unknown) {
  process.emitWarning(`embedded database maintenance failed: ${String(error)}`);
}

export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  if (options.databaseUrl) {
    configurePgTypes();
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize,
      // A cut connection must surface as an error, not a hang.
      connectionTimeoutMillis: 5_000,
      idleTimeoutMillis: 30_000,
    });
    // An idle client whose connection was terminated emits 'error' on the pool; without a
    // listener that would crash the process. The pool drops the client and opens a new one.
    pool.on('error', () => {});
    // A checked-out client between two queries (inside a transaction) emits 'error' itself
    // when its connection is cut; unhandled, that would end the process. The query in flight
    // fails on its own, and the pool discards the broken client when it is released.
    pool.on('connect', (client) => {
      client.on('error', () => {});
      executeMarkedStatementsByName(client);
    });
    const db: Db = new Kysely({ dialect: new PostgresDialect({ pool }) });
    return {
      db,
      kind: 'postgres',
      url: options.databaseUrl,
      // PostgreSQL's own autovacuum daemon maintains its tables.
      onMaintenanceError: reportMaintenanceError,
      close: () => db.destroy(),
    };
  }

  const release = options.inMemory ? () => {} : lockDataDir(options.dataDir);
  try {
    // Loaded here only: a process on PostgreSQL never holds PGlite's module (about 8 MB).
    const [{ PGlite }, { executeMarkedStatementsByNameOnPGlite }] = await Promise.all([
      import('@electric-sql/pglite'),
      import('./prepared-pglite.ts'),
    ]);
    const pglite = await PGlite.create({
      ...(options.inMemory ? {} : { dataDir: path.join(options.dataDir, 'pgdata') }),
      ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
      startParams: [
        ...PGlite.defaultStartParams,
        ...Object.entries(EMBEDDED_SETTINGS).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
      ],
    });
    executeMarkedStatementsByNameOnPGlite(pglite);
    const db: Db = new Kysely({ dialect: new PGliteDialect({ pglite }) });
    const handle: DatabaseHandle = {
      db,
      kind: 'pglite',
      pglite,
      onMaintenanceError: reportMaintenanceError,
      close: async () => {
        try {
          await autovacuum.stop();
          await db.destroy();
          // Kysely closes the instance only if a query went through it.
          if (!pglite.closed) await pglite.close();
        } finally {
          release();
        }
      },
    };
    const autovacuum = startEmbeddedAutovacuum(pglite, {
      intervalMs: options.autovacuumIntervalMs,
      onError: (error) => handle.onMaintenanceError(error),
    });
    return handle;
  } catch (error) {
    release();
    throw error;
  }
}
