import { sql } from 'kysely';
import { buildApp, loggerOptions } from '../app.ts';
import type { Config } from '../config.ts';
import { createMemoryRateLimiter, createRedisRateLimiter, type RateLimiter } from '../http/rate-limit.ts';
import { createDemoOnce, firstStartBanner } from './bootstrap.ts';
import { openRuntime } from './runtime.ts';
import { createWorkers } from './worker.ts';

export interface RunningServer {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts the HTTP server (and, unless turned off, the workers beside it). SIGTERM and SIGINT
 * stop accepting connections, let in-flight requests finish, then close the database.
 */
export async function startServer(config: Config): Promise<RunningServer> {
  const runtime = await openRuntime(config);
  const { database, services, secrets } = runtime;
  let app: Awaited<ReturnType<typeof buildApp>> | undefined;
  const rateLimiter: RateLimiter = config.redisUrl
    ? createRedisRateLimiter({
        url: config.redisUrl,
        onError: (error) =>
          app?.log.warn({ err: error }, 'rate limit store unavailable; letting requests through'),
      })
    : createMemoryRateLimiter();
  app = await buildApp({
    rateLimiter,
    services,
    adminTokenHash: secrets.adminTokenHash,
    logger: loggerOptions(config.logLevel),
    checkDatabase: async () => {
      await sql`SELECT 1`.execute(database.db);
    },
  });

  const demo = config.createDemo ? await createDemoOnce(database.db, services) : null;
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    await app.close();
    await database.close();
    throw error;
  }
  // Workers run beside the server unless they run as their own process (`leads worker`).
  const workers = config.runWorkers ? createWorkers(runtime, app.log as never) : null;
  if (workers) {
    try {
      await workers.start();
    } catch (error) {
      await app.close();
      await database.close();
      throw error;
    }
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = config.publicUrl.replace(/:\d+$/, `:${port}`);
  if (demo || secrets.newAdminToken) {
    process.stdout.write(
      `${firstStartBanner({ publicUrl: url, apiKey: demo?.apiKey, adminToken: secrets.newAdminToken })}\n`,
    );
  }

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      app.log.info('shutting down: finishing in-flight requests');
      const timer = setTimeout(() => {
        app.log.error('shutdown timed out; closing connections');
        app.server.closeAllConnections();
      }, config.shutdownTimeoutMs);
      timer.unref();
      try {
        await app.close();
        await workers?.stop(config.shutdownTimeoutMs);
        await rateLimiter.close();
      } finally {
        clearTimeout(timer);
        await database.close();
      }
    })();
    return stopping;
  };
  return { url, stop };
}

/** Runs the server until SIGTERM or SIGINT, then shuts down gracefully. */
export async function serveUntilSignal(config: Config): Promise<void> {
  // Handlers go in before the start, so that a signal during start-up (migrations, queue
  // install) still leads to a graceful stop once the server is up, not to a hard exit.
  let signalled: () => void = () => {};
  const signal = new Promise<void>((resolve) => {
    signalled = resolve;
  });
  const onSignal = () => signalled();
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const server = await startServer(config);
    await signal;
    await server.stop();
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}
