import { type ChildProcess, spawn } from 'node:child_process';
import { cp, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { type Config, loadConfig } from '../../src/config.ts';
import { onAFreePort, untilHealthy } from './readiness.ts';

export { freePort, onAFreePort, PortTakenError, untilHealthy } from './readiness.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The project's Node 24, whatever `node` the test runner found first. */
export const NODE_BIN = path.join(ROOT, 'node_modules/.bin/node');
export const LEADS_BIN = path.join(ROOT, 'bin/leads.js');

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code (or signal) once the process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal?: NodeJS.Signals): void;
}

export interface CapturedProcess {
  child: ChildProcess;
  /** Everything it printed so far, stdout and stderr together. */
  output(): string;
  /** Resolves with the exit code (or signal) once the process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Spawns a process in the project's directory with its output captured. Killed after
 * `maxLifetimeMs` at the latest, so that a failing test never leaves it behind.
 */
export function spawnCaptured(
  command: string,
  args: string[],
  env: Record<string, string | undefined>,
  maxLifetimeMs: number,
): CapturedProcess {
  const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  const lifetime = setTimeout(() => child.kill('SIGKILL'), maxLifetimeMs);
  lifetime.unref();
  exited.then(() => clearTimeout(lifetime));
  return { child, output: () => output, exited };
}

let migratedTemplate: Promise<string> | undefined;

/**
 * A new embedded data directory, migrated as `leads migrate` leaves it before a first `serve`
 * (the PostgreSQL twin of a test starts on a database its test migrated): a copy of one that
 * `leads migrate` made once for this test process, in the run's scratch directory (removed
 * after the run). A first start on an empty directory spends about 6 CPU seconds more in
 * PGlite's initdb (docs/decisions.md, Test suite's time); the tests of a first start itself make
 * their own empty directories. The caller removes the copy.
 */
export async function migratedDataDir(prefix: string): Promise<string> {
  migratedTemplate ??= (async () => {
    const template = path.join(inject('runScratchDir'), `migrated-data-${process.pid}`);
    const migrate = spawnCaptured(
      NODE_BIN,
      [LEADS_BIN, 'migrate'],
      { ...process.env, DATABASE_URL: undefined, LEADS_DATA_DIR: template, LOG_LEVEL: 'warn' },
      120_000,
    );
    const { code } = await migrate.exited;
    if (code !== 0) throw new Error(`leads migrate failed:\n${migrate.output()}`);
    return template;
  })();
  const template = await migratedTemplate;
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  await cp(template, dir, { recursive: true });
  return dir;
}

/**
 * Settings of a server started in the test's own process (`startServer`): a port the system
 * picks, no demo account, no workers, documents fetched from loopback; `env` adds or overrides.
 */
export function inProcessServerConfig(env: Record<string, string>): Config {
  return loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    LEADS_DEMO: 'false',
    LEADS_FETCH_ALLOW_PRIVATE: 'true',
    LEADS_RUN_WORKERS: 'false',
    LOG_LEVEL: 'warn',
    ...env,
  });
}

/** One API call to a running service: the status and the parsed JSON answer. */
export async function callApi(url: string, key: string, method = 'GET', body?: unknown) {
  const response = await fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: response.status, body: (await response.json()) as any };
}

/**
 * Starts `leads serve` as users start it, and waits until /health answers. Killed after
 * `maxLifetimeMs` at the latest, so that a failing test never leaves it behind.
 */
export async function startServerProcess(
  env: Record<string, string>,
  options: { maxLifetimeMs?: number; readyTimeoutMs?: number } = {},
): Promise<ServerProcess> {
  return onAFreePort((port) => startServerProcessOnce(port, env, options));
}

async function startServerProcessOnce(
  port: number,
  env: Record<string, string>,
  options: { maxLifetimeMs?: number; readyTimeoutMs?: number },
): Promise<ServerProcess> {
  const { child, output, exited } = spawnCaptured(
    NODE_BIN,
    [LEADS_BIN, 'serve'],
    {
      ...process.env,
      LOG_LEVEL: 'warn',
      LEADS_DEMO: 'false',
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
    },
    options.maxLifetimeMs ?? 120_000,
  );
  const url = `http://127.0.0.1:${port}`;
  await untilHealthy('leads serve', url, { child, output }, options.readyTimeoutMs ?? 60_000);
  return { url, child, output, exited, kill: (signal = 'SIGTERM') => child.kill(signal) };
}

export interface WorkerProcess extends CapturedProcess {
  /** The JSON log lines printed so far. */
  logLines(): { msg: string; [key: string]: unknown }[];
}

/** Starts `leads worker` (killed after `maxLifetimeMs` at the latest); it logs at info level. */
export function startWorkerProcess(
  env: Record<string, string>,
  options: { maxLifetimeMs?: number } = {},
): WorkerProcess {
  const started = spawnCaptured(
    NODE_BIN,
    [LEADS_BIN, 'worker'],
    { ...process.env, LOG_LEVEL: 'info', LEADS_DEMO: 'false', ...env },
    options.maxLifetimeMs ?? 90_000,
  );
  return {
    ...started,
    logLines: () =>
      started
        .output()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { msg: string }),
  };
}
