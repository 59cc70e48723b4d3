import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { onAFreePort, spawnCaptured, untilHealthy } from '../helpers/server-process.ts';

const SHUTDOWN_TIMEOUT_MS = 5_000;

/** The pids of a process's children (Linux: /proc/<pid>/task/<tid>/children). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** Whether a process runs (a zombie waiting for its parent counts as ended). */
function runs(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

interface NpmStart {
  npm: ChildProcess;
  port: number;
  lockFile: string;
  /** Every process below npm once the server answered: the shell (if any) and Node. */
  descendants: number[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

/** `npm start` as a user or a process manager runs it, until the service answers. */
function npmStart(dataDir: string): Promise<NpmStart> {
  return onAFreePort((port) => npmStartOn(port, dataDir));
}

async function npmStartOn(port: number, dataDir: string): Promise<NpmStart> {
  const {
    child: npm,
    output,
    exited,
  } = spawnCaptured(
    'npm',
    ['start'],
    {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      LEADS_DATA_DIR: dataDir,
      LEADS_DEMO: 'false',
      LOG_LEVEL: 'warn',
      LEADS_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    },
    120_000,
  );
  await untilHealthy('npm start', `http://127.0.0.1:${port}`, { child: npm, output }, 60_000);
  const descendants: number[] = [];
  for (let parents = [npm.pid!]; parents.length > 0; ) {
    parents = parents.flatMap(childrenOf);
    descendants.push(...parents);
  }
  return { npm, port, lockFile: path.join(dataDir, 'leads.lock'), descendants, exited, output };
}

describe('npm start under a process manager (the embedded database)', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`stops the whole service gracefully on one ${signal} to the npm process`, async () => {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), 'leads-npm-start-'));
      cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
      const started = await npmStart(dataDir);
      cleanups.push(() => {
        for (const pid of [started.npm.pid!, ...started.descendants]) {
          if (runs(pid)) process.kill(pid, 'SIGKILL');
        }
      });
      expect(started.descendants.length).toBeGreaterThan(0);
      expect(existsSync(started.lockFile)).toBe(true);
      const server = Number(readFileSync(started.lockFile, 'utf8').split('\n')[0]);
      expect(started.descendants).toContain(server);

      const signalledAt = Date.now();
      process.kill(started.npm.pid!, signal);
      const { code } = await started.exited;
      const stoppedIn = Date.now() - signalledAt;

      // npm ends only after the service it started has ended, with the service's exit code 0.
      expect(code, started.output()).toBe(0);
      expect(stoppedIn).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
      expect(await accepts(started.port)).toBe(false);
      expect(existsSync(started.lockFile)).toBe(false);
      for (const pid of started.descendants) expect(runs(pid), `process ${pid} left behind`).toBe(false);
      expect(started.output()).not.toContain('shutdown timed out');
    }, 90_000);
  }

  it('starts again on the same data directory at once after the stop', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'leads-npm-start-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    for (let round = 0; round < 2; round++) {
      const started = await npmStart(dataDir);
      cleanups.push(() => {
        for (const pid of [started.npm.pid!, ...started.descendants]) {
          if (runs(pid)) process.kill(pid, 'SIGKILL');
        }
      });
      process.kill(started.npm.pid!, 'SIGTERM');
      expect((await started.exited).code, started.output()).toBe(0);
    }
  }, 120_000);
});
