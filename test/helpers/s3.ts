import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import type { S3Settings } from '../../src/storage/s3-storage.ts';

/** s3rver's one account: other keys are refused. */
export const S3_ACCESS_KEY_ID = 'S3RVER';
const S3_SECRET_ACCESS_KEY = 'S3RVER';

export interface TestS3 {
  endpoint: string;
  bucket: string;
  /** Settings of a store in the bucket, as LEADS_S3_* give them. */
  settings: S3Settings;
  /** The same as environment variables (LEADS_FILES_STORAGE=s3 and LEADS_S3_*). */
  env: Record<string, string>;
  /** The names of the objects in the bucket. */
  objectNames(): Promise<string[]>;
  objectBytes(name: string): Promise<Buffer>;
  close(): Promise<void>;
}

/** A real S3-compatible server (s3rver) on 127.0.0.1 with one empty bucket, in this process. */
export async function startTestS3(options: { prefix?: string } = {}): Promise<TestS3> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'leads-s3-'));
  const bucket = 'leads-documents';
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: dir,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const settings: S3Settings = {
    endpoint,
    bucket,
    region: 'us-east-1',
    accessKeyId: S3_ACCESS_KEY_ID,
    secretAccessKey: S3_SECRET_ACCESS_KEY,
    forcePathStyle: true,
    prefix: options.prefix ?? '',
  };
  const client = new S3Client({
    endpoint,
    region: settings.region,
    forcePathStyle: true,
    credentials: { accessKeyId: S3_ACCESS_KEY_ID, secretAccessKey: S3_SECRET_ACCESS_KEY },
  });
  return {
    endpoint,
    bucket,
    settings,
    env: {
      LEADS_FILES_STORAGE: 's3',
      LEADS_S3_ENDPOINT: endpoint,
      LEADS_S3_BUCKET: bucket,
      LEADS_S3_ACCESS_KEY_ID: S3_ACCESS_KEY_ID,
      LEADS_S3_SECRET_ACCESS_KEY: S3_SECRET_ACCESS_KEY,
      LEADS_S3_FORCE_PATH_STYLE: 'true',
      ...(options.prefix ? { LEADS_S3_PREFIX: options.prefix } : {}),
    },
    async objectNames() {
      const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
      return (listed.Contents ?? []).map((object) => object.Key ?? '').sort();
    },
    async objectBytes(name) {
      const answer = await client.send(new GetObjectCommand({ Bucket: bucket, Key: name }));
      return Buffer.from((await answer.Body?.transformToByteArray()) ?? []);
    },
    async close() {
      client.destroy();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
