import type { Config } from '../config.ts';
import { type DatabaseHandle, openDatabase } from '../db/client.ts';
import { migrate } from '../db/migrate.ts';
import { createDocumentBackend } from '../modules/documents/documents.backend.ts';
import { createServices, type Services } from '../services.ts';
import { ensureInstanceSecrets, type InstanceSecrets } from './bootstrap.ts';

export interface Runtime {
  config: Config;
  database: DatabaseHandle;
  services: Services;
  secrets: InstanceSecrets;
  appliedMigrations: string[];
}

/** Opens the database, brings its schema up to date, and wires the services: what every command starts with. */
export async function openRuntime(config: Config): Promise<Runtime> {
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.databasePoolSize,
  });
  try {
    const { applied } = await migrate(database.db);
    const secrets = await ensureInstanceSecrets(database.db, config);
    const services = createServices({
      db: database.db,
      secret: secrets.secret,
      publicUrl: config.publicUrl,
      // A third of the pool: larger groups cost less per record, and the rest of the pool stays
      // free for everything else (docs/decisions.md, Group commit, has the measurements).
      concurrentCreates: Math.max(1, Math.floor(config.databasePoolSize / 3)),
      ...createDocumentBackend({ filesDir: config.filesDir, allowPrivate: config.fetchAllowPrivate }),
      outbound: {
        allowPrivate: config.fetchAllowPrivate,
        retryScheduleMs: config.retryScheduleMs,
        disableAfterMs: config.webhookDisableAfterMs,
        smtpUrl: config.smtpUrl,
        mailFrom: config.mailFrom,
        outboxDir: config.outboxDir,
      },
    });
    return { config, database, services, secrets, appliedMigrations: applied };
  } catch (error) {
    await database.close();
    throw error;
  }
}
