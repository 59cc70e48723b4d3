import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { LEADS_BIN, NODE_BIN, spawnCaptured } from '../helpers/server-process.ts';

const S3 = {
  LEADS_FILES_STORAGE: 's3',
  LEADS_S3_BUCKET: 'leads-documents',
};

/** LEADS_FILES_STORAGE and the S3 settings (decisions §1). */
describe('document storage settings', () => {
  describe('happy path', () => {
    it('keeps documents in the directory by default', () => {
      const config = loadConfig({ LEADS_DATA_DIR: '/srv/leads' });
      expect(config).toMatchObject({
        filesStorage: 'directory',
        filesDir: '/srv/leads/files',
        s3: undefined,
      });
      expect(loadConfig({ LEADS_FILES_STORAGE: 'Directory', LEADS_FILES_DIR: '/srv/files' })).toMatchObject({
        filesStorage: 'directory',
        filesDir: '/srv/files',
      });
    });

    it('chooses the database', () => {
      expect(loadConfig({ LEADS_FILES_STORAGE: 'database' })).toMatchObject({
        filesStorage: 'database',
        s3: undefined,
      });
    });

    it('reads the S3 settings, with a region and path style by default and the prefix ending in /', () => {
      expect(loadConfig(S3).s3).toEqual({
        endpoint: undefined,
        bucket: 'leads-documents',
        region: 'us-east-1',
        accessKeyId: undefined,
        secretAccessKey: undefined,
        forcePathStyle: false,
        prefix: '',
      });
      expect(
        loadConfig({
          ...S3,
          LEADS_S3_ENDPOINT: 'https://s3.example.com:9000/',
          LEADS_S3_REGION: 'eu-central-1',
          LEADS_S3_ACCESS_KEY_ID: 'AKIAEXAMPLE',
          LEADS_S3_SECRET_ACCESS_KEY: 'secret/example+key',
          LEADS_S3_FORCE_PATH_STYLE: 'true',
          LEADS_S3_PREFIX: '/instances/leadline/',
        }).s3,
      ).toEqual({
        endpoint: 'https://s3.example.com:9000',
        bucket: 'leads-documents',
        region: 'eu-central-1',
        accessKeyId: 'AKIAEXAMPLE',
        secretAccessKey: 'secret/example+key',
        forcePathStyle: true,
        prefix: 'instances/leadline/',
      });
    });
  });

  describe('errors', () => {
    it('refuses a store it does not know, naming the setting', () => {
      for (const wrong of ['disk', 'postgres', 's4', 'files']) {
        expect(() => loadConfig({ LEADS_FILES_STORAGE: wrong }), wrong).toThrow(
          `LEADS_FILES_STORAGE must be directory, database or s3, got "${wrong}"`,
        );
      }
    });

    it('refuses S3 without a bucket, or with a wrong bucket, region, endpoint, path-style switch or prefix', () => {
      expect(() => loadConfig({ LEADS_FILES_STORAGE: 's3' })).toThrow(
        'LEADS_S3_BUCKET is required with LEADS_FILES_STORAGE=s3',
      );
      const cases: [Record<string, string>, string][] = [
        [{ LEADS_S3_BUCKET: 'Leads_Documents' }, 'LEADS_S3_BUCKET must be a bucket name'],
        [{ LEADS_S3_BUCKET: 'ab' }, 'LEADS_S3_BUCKET must be a bucket name'],
        [{ LEADS_S3_REGION: 'eu west' }, 'LEADS_S3_REGION must be a region name'],
        [
          { LEADS_S3_ENDPOINT: 'ftp://s3.example.com' },
          'LEADS_S3_ENDPOINT must look like https://host[:port]',
        ],
        [{ LEADS_S3_ENDPOINT: 's3.example.com' }, 'LEADS_S3_ENDPOINT must look like https://host[:port]'],
        [{ LEADS_S3_ENDPOINT: 'https://s3.example.com/?x=1' }, 'LEADS_S3_ENDPOINT must look like'],
        [{ LEADS_S3_FORCE_PATH_STYLE: 'sometimes' }, 'LEADS_S3_FORCE_PATH_STYLE must be true or false'],
        [{ LEADS_S3_PREFIX: 'a/../b' }, 'LEADS_S3_PREFIX must be'],
        [{ LEADS_S3_PREFIX: 'a//b' }, 'LEADS_S3_PREFIX must be'],
        [{ LEADS_S3_PREFIX: 'dossiers clients' }, 'LEADS_S3_PREFIX must be'],
        [{ LEADS_S3_PREFIX: 'x'.repeat(201) }, 'LEADS_S3_PREFIX must be'],
        [
          { LEADS_S3_ACCESS_KEY_ID: 'AKIAEXAMPLE' },
          'LEADS_S3_ACCESS_KEY_ID and LEADS_S3_SECRET_ACCESS_KEY go together',
        ],
        [
          { LEADS_S3_SECRET_ACCESS_KEY: 'alone' },
          'LEADS_S3_ACCESS_KEY_ID and LEADS_S3_SECRET_ACCESS_KEY go together',
        ],
      ];
      for (const [env, message] of cases) {
        expect(() => loadConfig({ ...S3, ...env }), JSON.stringify(env)).toThrow(message);
      }
    });

    it('refuses the settings of a store that is not chosen, rather than ignore them', () => {
      expect(() => loadConfig({ LEADS_S3_BUCKET: 'leads-documents' })).toThrow(
        'LEADS_S3_BUCKET is set, but LEADS_FILES_STORAGE is directory: S3 settings apply only with LEADS_FILES_STORAGE=s3',
      );
      expect(() =>
        loadConfig({
          LEADS_FILES_STORAGE: 'database',
          LEADS_S3_ENDPOINT: 'https://s3.example.com',
          LEADS_S3_PREFIX: 'x',
        }),
      ).toThrow('LEADS_S3_ENDPOINT, LEADS_S3_PREFIX are set, but LEADS_FILES_STORAGE is database');
      for (const storage of ['database', 's3']) {
        expect(() =>
          loadConfig({ ...S3, LEADS_FILES_STORAGE: storage, LEADS_FILES_DIR: '/srv/files' }),
        ).toThrow(`LEADS_FILES_DIR is set, but LEADS_FILES_STORAGE is ${storage}`);
      }
    });

    it('stops `leads migrate` with the message before it opens anything', async () => {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), 'leads-files-settings-'));
      try {
        const inherited = Object.fromEntries(
          Object.entries(process.env).filter(
            ([name]) => !name.startsWith('LEADS_') && name !== 'DATABASE_URL',
          ),
        );
        const run = spawnCaptured(
          NODE_BIN,
          [LEADS_BIN, 'migrate'],
          { ...inherited, LEADS_DATA_DIR: dataDir, LEADS_FILES_STORAGE: 's3' },
          30_000,
        );
        expect((await run.exited).code).toBe(2);
        expect(run.output()).toContain(
          'leads migrate: LEADS_S3_BUCKET is required with LEADS_FILES_STORAGE=s3',
        );
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    });
  });

  describe('security', () => {
    it('never repeats credentials given in the endpoint address', () => {
      let message = '';
      try {
        loadConfig({ ...S3, LEADS_S3_ENDPOINT: 'https://AKIAEXAMPLE:topsecret@s3.example.com' });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toBe(
        'LEADS_S3_ENDPOINT must carry no credentials: give them as LEADS_S3_ACCESS_KEY_ID and LEADS_S3_SECRET_ACCESS_KEY',
      );
    });

    it('never repeats the secret access key in a refusal', () => {
      const cases: [Record<string, string>, string][] = [
        [{ ...S3, LEADS_S3_SECRET_ACCESS_KEY: 'topsecret' }, 'go together'],
        [{ LEADS_FILES_STORAGE: 'database', LEADS_S3_SECRET_ACCESS_KEY: 'topsecret' }, 'is set, but'],
      ];
      for (const [env, expected] of cases) {
        let message = '';
        try {
          loadConfig(env);
        } catch (error) {
          message = (error as Error).message;
        }
        expect(message).toContain(expected);
        expect(message).not.toContain('topsecret');
      }
    });
  });
});
