import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { checkStorageKey, createSpool, defaultSpoolDir, type FileStorage, missingFile } from './storage.ts';

/** An S3-compatible bucket (LEADS_S3_*), the operator's: reached directly, not as a user's address. */
export interface S3Settings {
  /** `https://…` of an S3-compatible service; unset: Amazon S3 of `region`. */
  endpoint: string | undefined;
  bucket: string;
  region: string;
  /** Both set, or neither (then the SDK's usual chain: AWS_* variables, profiles, instance roles). */
  accessKeyId: string | undefined;
  secretAccessKey: string | undefined;
  /** `https://endpoint/bucket/key` rather than `https://bucket.endpoint/key`. */
  forcePathStyle: boolean;
  /** Put before every object name: empty, or ending with `/`. */
  prefix: string;
}

const ACCOUNT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** An object name's account part is a uuid, never a path of the caller's making. */
function checkAccountId(accountId: string): string {
  if (!ACCOUNT_ID.test(accountId)) throw new Error('not an account id');
  return accountId;
}

type S3Sdk = typeof import('@aws-sdk/client-s3');

export interface S3StorageOptions {
  /** Where a file waits before it is sent (`defaultSpoolDir()`). */
  spoolDir?: string;
  /** The wait before a put's second attempt, doubled before each further one (200 ms). */
  retryDelayMs?: number;
}

/** Attempts of one put: the SDK does not retry a body it streams, so the store does. */
const PUT_ATTEMPTS = 3;

/** Whether a failed put may succeed if sent again: no answer at all, a server error or throttling. */
function mayRetry(error: unknown): boolean {
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  return status === undefined || status >= 500 || status === 429;
}

/**
 * The SDK's log, quiet as its default, without the one warning it otherwise writes to the
 * console: that a failed request with a streamed body is not retried (the store retries it).
 */
const quietLogger = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * Document bytes in an S3-compatible bucket (LEADS_FILES_STORAGE=s3), one object per file named
 * `<prefix><account id>/<2 hex>/<uuid>`. A file is read whole (within its limit) into a temporary
 * file, so that no document is held in memory whole, and streamed from there in one PutObject,
 * which creates the object only once all of it arrived; a put without an answer or with a server
 * error is sent again (at most three times in all); a put that fails still asks for the object's
 * removal, in case the bucket took it before the answer was lost. The SDK is loaded with the
 * first file, so that the other stores never load it.
 */
export function createS3Storage(
  settings: S3Settings,
  { spoolDir, retryDelayMs = 200 }: S3StorageOptions = {},
): FileStorage {
  const spool = createSpool(spoolDir ?? defaultSpoolDir());
  let connecting: Promise<{ sdk: S3Sdk; client: InstanceType<S3Sdk['S3Client']> }> | undefined;
  const connect = () => {
    connecting ??= import('@aws-sdk/client-s3').then((sdk) => ({
      sdk,
      client: new sdk.S3Client({
        endpoint: settings.endpoint,
        region: settings.region,
        forcePathStyle: settings.forcePathStyle,
        credentials:
          settings.accessKeyId && settings.secretAccessKey
            ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey }
            : undefined,
        // Checksums only where S3 requires them: many S3-compatible services refuse the
        // trailing checksums the SDK otherwise sends with every upload.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        requestHandler: { connectionTimeout: 10_000, requestTimeout: 60_000 },
        logger: quietLogger,
      }),
    }));
    return connecting;
  };
  const objectName = (accountId: string, key: string) =>
    `${settings.prefix}${checkAccountId(accountId)}/${checkStorageKey(key)}`;
  const removeObject = async (accountId: string, key: string) => {
    const { sdk, client } = await connect();
    await client.send(
      new sdk.DeleteObjectCommand({ Bucket: settings.bucket, Key: objectName(accountId, key) }),
    );
  };

  return {
    async put(accountId, source, options) {
      checkAccountId(accountId);
      const spooled = await spool(source, options);
      const { file } = spooled;
      try {
        const { sdk, client } = await connect();
        try {
          for (let attempt = 1; ; attempt++) {
            const body = createReadStream(spooled.path);
            try {
              await client.send(
                new sdk.PutObjectCommand({
                  Bucket: settings.bucket,
                  Key: objectName(accountId, file.key),
                  Body: body,
                  ContentLength: file.size,
                  ContentType: 'application/octet-stream',
                }),
                { abortSignal: options.signal },
              );
              return file;
            } catch (error) {
              if (attempt >= PUT_ATTEMPTS || options.signal?.aborted || !mayRetry(error)) throw error;
            } finally {
              // A body the SDK did not read to its end still holds its file open.
              body.destroy();
            }
            await sleep(retryDelayMs * 2 ** (attempt - 1), undefined, { signal: options.signal });
          }
        } catch (error) {
          await removeObject(accountId, file.key).catch(() => {});
          throw error;
        }
      } finally {
        await spooled.discard();
      }
    },

    async open(accountId, key) {
      const { sdk, client } = await connect();
      try {
        const answer = await client.send(
          new sdk.GetObjectCommand({ Bucket: settings.bucket, Key: objectName(accountId, key) }),
        );
        if (!(answer.Body instanceof Readable)) throw new Error('the S3 answer has no body stream');
        return answer.Body;
      } catch (error) {
        if (error instanceof sdk.NoSuchKey || (error as { name?: string }).name === 'NotFound') {
          throw missingFile(key);
        }
        throw error;
      }
    },

    remove: removeObject,
  };
}
