import type { Config } from '../config.ts';
import { type DatabaseHandle, openDatabase } from '../db/client.ts';
import { migrate } from '../db/migrate.ts';
import { createJobQueue, type JobLogger, type JobQueue } from '../jobs/queue.ts';
import { createDocumentBackend, filesStoreFor } from '../modules/documents/documents.backend.ts';
import { createServices, type Services } from '../services.ts';
import { ensureInstanceSecrets, type InstanceSecrets } from './bootstrap.ts';
import { tuneHeapForService } from './heap.ts';
import { tuneJitForDatabase } from './jit.ts';

export interface Runtime {
  config: Config;
  database: DatabaseHandle;
  services: Services;
  secrets: InstanceSecrets;
  /**
   * The job queue, not started yet: the services enqueue through it, so every process that
   * serves starts it (working or not, see `createWorkers`).
   */
  queue: JobQueue;
  appliedMigrations: string[];
  /**
   * Tells the runtime the port the server listens on; with PORT=0 and no PUBLIC_URL that port
   * goes into the public URL that links are made with. Returns the public URL.
   */
  listeningOn(port: number): string;
}

/**
 * Opens the database, brings its schema up to date, and wires the services with the job queue:
 * what every serving command starts with. `jobs.logger` receives the queue's lines; `jobs.works`
 * says whether this process works jobs or only enqueues them.
 */
export async function openRuntime(
  config: Config,
  jobs: { logger: JobLogger; works: boolean },
): Promise<Runtime> {
  tuneHeapForService();
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.databasePoolSize,
  });
  tuneJitForDatabase(database.kind);
  try {
    const { applied } = await migrate(database.db);
    const secrets = await ensureInstanceSecrets(database.db, config);
    const queue = createJobQueue(database, jobs);
    let publicUrl = config.publicUrl;
    const services = createServices({
      db: database.db,
      secret: secrets.secret,
      currentPublicUrl: () => publicUrl,
      // A third of the pool: larger groups cost less per record, and the rest of the pool stays
      // free for everything else (docs/decisions.md, Group commit, has the measurements).
      concurrentCreates: Math.max(1, Math.floor(config.databasePoolSize / 3)),
      ...createDocumentBackend({
        files: filesStoreFor(config, database.db),
        allowPrivate: config.fetchAllowPrivate,
        // The sender sees `storage_error`; the operator must learn that the store fails.
        onStorageError: (error) =>
          jobs.logger.error({ err: error }, 'document storage failed: a fetched document was left out'),
      }),
      outbound: {
        allowPrivate: config.fetchAllowPrivate,
        retryScheduleMs: config.retryScheduleMs,
        disableAfterMs: config.webhookDisableAfterMs,
        smtpUrl: config.smtpUrl,
        mailFrom: config.mailFrom,
        outboxDir: config.outboxDir,
        leaseMs: config.outboundLeaseMs,
      },
      jobs: queue,
      bookingLinkTtlMs: config.bookingLinkTtlMs,
      signInLinkTtlMs: config.signInLinkTtlMs,
    });
    const listeningOn = (port: number) => {
      // Only the default address (http://HOST:PORT) names port 0; a PUBLIC_URL given is kept.
      if (config.port === 0) publicUrl = publicUrl.replace(/:0$/, `:${port}`);
      return publicUrl;
    };
    return { config, database, services, secrets, queue, appliedMigrations: applied, listeningOn };
  } catch (error) {
    await database.close();
    throw error;
  }
}
