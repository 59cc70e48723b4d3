import type { ChildProcess } from 'node:child_process';
import net from 'node:net';

/*
 * Starting a server process and waiting until it answers, shared by the tests and the bench
 * (which cannot import the helpers that use vitest).
 */

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/** The port chosen for a server was taken by another process before the server listened. */
export class PortTakenError extends Error {}

/**
 * Starts a server on a port chosen free beforehand, again on another port when it was taken
 * meanwhile (`startOnce` throws PortTakenError), up to three times. A port is free when chosen,
 * but between then and the server's listen (its start takes a second or more) another process
 * can take it: seen as EADDRINUSE with test runs side by side. The server then exits without
 * having served anything.
 */
export async function onAFreePort<T>(startOnce: (port: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(await freePort());
    } catch (error) {
      if (!(error instanceof PortTakenError) || attempt === 3) throw error;
    }
  }
}

/**
 * Waits until the server at `url` answers /health. A process that ended first throws
 * (PortTakenError when its port was taken: see onAFreePort); one that is not ready in time is
 * killed.
 */
export async function untilHealthy(
  name: string,
  url: string,
  { child, output }: { child: ChildProcess; output(): string },
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const message = `${name} ended before it answered:\n${output()}`;
      throw output().includes('EADDRINUSE') ? new PortTakenError(message) : new Error(message);
    }
    try {
      // Bounded: until the server listens, whatever else holds the port may never answer.
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${name} not ready in time:\n${output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
