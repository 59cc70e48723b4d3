import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DataDirLockedError, lockDataDir, processStartIdentity } from '../../src/db/client.ts';

/** Another live process whose pid a lock file can name. */
function startBystander(): ChildProcess {
  return spawn('sleep', ['60'], { stdio: 'ignore' });
}

describe('the embedded data-directory lock', () => {
  let dir: string;
  let bystander: ChildProcess;
  const releases: (() => void)[] = [];
  const lockFile = () => path.join(dir, 'leads.lock');

  beforeAll(async () => {
    bystander = startBystander();
    await new Promise((resolve) => bystander.once('spawn', resolve));
  });
  afterAll(() => {
    bystander.kill('SIGKILL');
  });
  afterEach(async () => {
    for (const release of releases.splice(0)) release();
    await rm(dir, { recursive: true, force: true });
  });
  const take = () => {
    const release = lockDataDir(dir);
    releases.push(release);
    return release;
  };

  describe('happy path', () => {
    it("holds the owner's pid and start identity, and is gone after release", async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'leads-lock-'));
      const release = take();
      const identity = processStartIdentity(process.pid);
      expect(identity).toEqual(expect.any(String));
      expect(readFileSync(lockFile(), 'utf8')).toBe(`${process.pid}\n${identity}\n`);
      release();
      expect(existsSync(lockFile())).toBe(false);
      expect(await readdir(dir)).toEqual([]);
    });

    it('tells a process from another one and from a pid that does not run', async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'leads-lock-'));
      const own = processStartIdentity(process.pid);
      expect(processStartIdentity(process.pid)).toBe(own);
      expect(processStartIdentity(bystander.pid!)).toEqual(expect.any(String));
      expect(processStartIdentity(bystander.pid!)).not.toBe(own);
      const ended = spawn('true');
      await new Promise((resolve) => ended.once('exit', resolve));
      expect(processStartIdentity(ended.pid!)).toBeUndefined();
    });

    it('takes over a lock whose pid now belongs to a process started at another time (a reused pid)', async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'leads-lock-'));
      const identity = processStartIdentity(bystander.pid!)!;
      // The same pid, written by a process that started earlier than the one running under it now.
      const earlier = identity.replace(/\d+$/, (ticks) => String(Number(ticks) - 1));
      expect(earlier).not.toBe(identity);
      writeFileSync(lockFile(), `${bystander.pid}\n${earlier}\n`);
      take();
      expect(readFileSync(lockFile(), 'utf8').split('\n')[0]).toBe(String(process.pid));
    });

    it('takes over the lock of a process that ended', async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'leads-lock-'));
      const ended = spawn('true');
      await new Promise((resolve) => ended.once('exit', resolve));
      writeFileSync(lockFile(), `${ended.pid}\nlinux gone 1\n`);
      take();
      expect(readFileSync(lockFile(), 'utf8').split('\n')[0]).toBe(String(process.pid));
    });
  });

  describe('errors', () => {
    it('refuses while the process that wrote the lock runs', async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'leads-lock-'));
      const held = `${bystander.pid}\n${processStartIdentity(bystander.pid!)}\n`;
      writeFileSync(lockFile(), held);
      expect(() => take()).toThrow(DataDirLockedError);
      expect(() => take()).toThrow(`pid ${bystander.pid}`);
      expect(readFileSync(lockFile(), 'utf8')).toBe(held);
    });

    it('refuses on a lock of the earlier format (pid only) while that pid runs', async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'leads-lock-'));
      writeFileSync(lockFile(), String(bystander.pid));
      expect(() => take()).toThrow(DataDirLockedError);
    });
  });

  describe('security', () => {
    it("never releases a lock another process took after this one's was taken over", async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'leads-lock-'));
      const release = take();
      const other = `${bystander.pid}\n${processStartIdentity(bystander.pid!)}\n`;
      writeFileSync(lockFile(), other);
      release();
      expect(readFileSync(lockFile(), 'utf8')).toBe(other);
    });
  });
});
