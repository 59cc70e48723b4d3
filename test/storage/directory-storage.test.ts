import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDirectoryStorage } from '../../src/storage/directory-storage.ts';
import { TooLargeError } from '../../src/storage/storage.ts';

const ACCOUNT = '00000000-0000-4000-8000-000000000001';

describe('directory storage', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'leads-storage-'));
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it('stores the bytes at <root>/<key>, whatever the account, with their size and SHA-256', async () => {
    const storage = createDirectoryStorage(root);
    const stored = await storage.put(ACCOUNT, Readable.from([Buffer.from('hello '), Buffer.from('world')]), {
      maxBytes: 100,
    });
    expect(stored.size).toBe(11);
    expect(stored.sha256).toBe('b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9');
    expect((await readFile(path.join(root, stored.key))).toString()).toBe('hello world');
    expect(await readdir(path.join(root, 'tmp'))).toEqual([]);
  });

  it('leaves no temporary file behind when a put fails at once, however many fail together', async () => {
    const storage = createDirectoryStorage(root);
    const failures = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) =>
        storage.put(
          ACCOUNT,
          i % 2 === 0
            ? Readable.from([Buffer.alloc(64)])
            : new Readable({
                read() {
                  this.destroy(new Error('source failed'));
                },
              }),
          { maxBytes: 10 },
        ),
      ),
    );
    expect(failures.every((result) => result.status === 'rejected')).toBe(true);
    expect(
      failures.some((result) => result.status === 'rejected' && result.reason instanceof TooLargeError),
    ).toBe(true);
    // Give any write stream still opening its file the chance to do so.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await readdir(path.join(root, 'tmp'))).toEqual([]);
  });
});
