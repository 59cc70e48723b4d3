import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { EMBEDDED_SETTINGS, openDatabase } from '../../src/db/client.ts';

/** The settings the embedded database reports, by name. */
async function settingsOf(handle: Awaited<ReturnType<typeof openDatabase>>, names: string[]) {
  const { rows } = await sql<{ name: string; value: string }>`
    SELECT name, current_setting(name) AS value FROM unnest(${names}::text[]) AS name`.execute(handle.db);
  return Object.fromEntries(rows.map((row) => [row.name, row.value]));
}

describe('the embedded database is sized for a small server', () => {
  it('starts a new data directory, and again an existing one, with its memory settings', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'leads-settings-'));
    try {
      for (const start of ['new', 'existing']) {
        const handle = await openDatabase({ databaseUrl: undefined, dataDir: dir, poolSize: 1 });
        try {
          const settings = await settingsOf(handle, ['shared_buffers', 'maintenance_work_mem']);
          expect(settings, start).toEqual({ shared_buffers: '64MB', maintenance_work_mem: '16MB' });
          expect(settings).toEqual(EMBEDDED_SETTINGS);
        } finally {
          await handle.close();
        }
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps the settings PGlite starts with (no parallel workers, the search path)', async () => {
    const handle = await openDatabase({ databaseUrl: undefined, dataDir: '', poolSize: 1, inMemory: true });
    try {
      const settings = await settingsOf(handle, ['max_worker_processes', 'search_path', 'shared_buffers']);
      expect(settings).toEqual({ max_worker_processes: '0', search_path: 'public', shared_buffers: '64MB' });
    } finally {
      await handle.close();
    }
  });

  it('`npm start` keeps WebAssembly on its baseline compiler (no optimizing compile of the SQL parser)', () => {
    const pkg = JSON.parse(readFileSync(path.join(import.meta.dirname, '../../package.json'), 'utf8'));
    expect(pkg.scripts.start.split(/\s+/)).toContain('--liftoff-only');
  });
});
