import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { distributionFactory } from '../helpers/distribution-factory.ts';
import { distributionAccount, expectRefusedCredentials, wrongCredentials } from './support.ts';

const REASONS = '/api/v1/settings/return-reasons';
const MISSING = '00000000-0000-4000-8000-000000000000';

describe.each(TEST_DATABASES)('distribution: return reasons on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await distributionAccount(t);
  });
  afterAll(async () => t?.close());

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown, key = account.apiKey) =>
    t.request({ method, url, key, body });

  describe('happy path', () => {
    it('adds, lists in order and deletes return reasons', async () => {
      const first = await call('POST', REASONS, { name: '  Wrong phone number ' });
      expect(first.statusCode).toBe(201);
      expect(first.json()).toEqual({ id: expect.any(String), name: 'Wrong phone number' });
      const second = (await call('POST', REASONS, { name: 'Duplicate lead' })).json();
      expect((await call('GET', REASONS)).json()).toEqual({
        return_reasons: [first.json(), second],
        next_cursor: null,
      });
      const deleted = await call('DELETE', `${REASONS}/${first.json().id}`);
      expect(deleted.statusCode).toBe(204);
      expect(deleted.body).toBe('');
      expect((await call('GET', REASONS)).json()).toEqual({ return_reasons: [second], next_cursor: null });
      // The name is free again once its reason is gone.
      expect((await call('POST', REASONS, { name: 'wrong phone number' })).statusCode).toBe(201);
    });
  });

  describe('read for returns', () => {
    it('lists the same reasons under /api/v1/distribution/return-reasons for keys that may return', async () => {
      const own = await distributionAccount(t);
      const reason = (await call('POST', REASONS, { name: 'No answer' }, own.apiKey)).json();
      const wrong = await wrongCredentials(t, own, 'settings');
      const listed = await call(
        'GET',
        '/api/v1/distribution/return-reasons',
        undefined,
        wrong.withoutPermission,
      );
      expect(listed.statusCode).toBe(200);
      expect(listed.json()).toEqual({ return_reasons: [reason], next_cursor: null });
      // Without the distribution permission, or without the module, it is refused.
      const withoutDistribution = await wrongCredentials(t, own, 'distribution');
      const without = await t.createAccount({ modules: ['crm'] });
      await expectRefusedCredentials(
        t,
        [['GET', '/api/v1/distribution/return-reasons', undefined]],
        withoutDistribution,
        without,
      );
      // Another account's reasons are never listed.
      expect(
        (await call('GET', '/api/v1/distribution/return-reasons'))
          .json()
          .return_reasons.map((r: { id: string }) => r.id),
      ).not.toContain(reason.id);
    });
  });

  describe('errors', () => {
    it('refuses a taken name in any case with 409 return_reason_taken', async () => {
      await call('POST', REASONS, { name: 'Not interested' });
      const again = await call('POST', REASONS, { name: 'NOT INTERESTED' });
      expect(again.statusCode).toBe(409);
      expect(again.json()).toEqual({ error: 'return_reason_taken' });
    });

    it('refuses a blank, missing, overlong or mistyped name and unknown keys with 422', async () => {
      for (const body of [
        {},
        { name: '' },
        { name: '   ' },
        { name: 'x'.repeat(201) },
        { name: 3 },
        { name: 'a', b: 1 },
      ]) {
        const response = await call('POST', REASONS, body);
        expect(response.statusCode, JSON.stringify(body)).toBe(422);
        expect(response.json().error).toBe('validation_failed');
      }
    });

    it('answers 404 for an unknown id', async () => {
      expect((await call('DELETE', `${REASONS}/${MISSING}`)).statusCode).toBe(404);
      expect((await call('DELETE', `${REASONS}/nope`)).statusCode).toBe(404);
    });

    it('holds at most 200 reasons per account', async () => {
      const owner = await distributionAccount(t);
      for (let i = 0; i < 200; i++) {
        const response = await call('POST', REASONS, { name: `Reason ${i}` }, owner.apiKey);
        if (response.statusCode !== 201) throw new Error(response.body);
      }
      const refused = await call('POST', REASONS, { name: 'One more' }, owner.apiKey);
      expect(refused.statusCode).toBe(422);
      expect(refused.json().details[0]).toMatchObject({ key: 'name', reason: 'too_many' });
      // Both lists come in pages (100 unless told) that follow next_cursor to every reason.
      for (const [path, key] of [
        [REASONS, owner.apiKey],
        [
          '/api/v1/distribution/return-reasons',
          (await wrongCredentials(t, owner, 'settings')).withoutPermission,
        ],
      ] as const) {
        const names: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const response = await call('GET', `${path}${cursor ? `?cursor=${cursor}` : ''}`, undefined, key);
          expect(response.statusCode, response.body).toBe(200);
          names.push(...response.json().return_reasons.map((r: { name: string }) => r.name));
          cursor = response.json().next_cursor;
          pages++;
        } while (cursor);
        expect(pages, path).toBe(2);
        expect(names, path).toEqual(Array.from({ length: 200 }, (_, i) => `Reason ${i}`));
        const small = (await call('GET', `${path}?limit=150`, undefined, key)).json();
        expect(small.return_reasons).toHaveLength(150);
        const rest = (
          await call('GET', `${path}?limit=150&cursor=${small.next_cursor}`, undefined, key)
        ).json();
        expect(rest).toMatchObject({ next_cursor: null });
        expect(rest.return_reasons.map((r: { name: string }) => r.name)).toEqual(names.slice(150));
        expect((await call('GET', `${path}?limit=501`, undefined, key)).statusCode).toBe(422);
        expect((await call('GET', `${path}?cursor=forged`, undefined, key)).statusCode).toBe(422);
      }
    });
  });

  describe('concurrency', () => {
    // The limit is counted under the account's lock: concurrent additions near it cannot pass it
    // (PostgreSQL runs them at once; the embedded database has one connection).
    it.runIf(kind === 'postgres')('keeps concurrent additions within the limit of 200', async () => {
      const owner = await distributionAccount(t);
      const factory = distributionFactory(t, owner);
      for (let i = 0; i < 195; i++) await factory.returnReason(`Stored ${i}`);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => call('POST', REASONS, { name: `Racing ${i}` }, owner.apiKey)),
      );
      const statuses = answers.map((answer) => answer.statusCode);
      expect(statuses.filter((status) => status === 201)).toHaveLength(5);
      expect(statuses.filter((status) => status === 422)).toHaveLength(15);
      const stored = await t.db
        .selectFrom('return_reasons')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('account_id', '=', owner.id)
        .executeTakeFirstOrThrow();
      expect(Number(stored.n)).toBe(200);
    });
  });

  describe('security', () => {
    it('needs an API key with the settings permission, on an account with the module', async () => {
      const reason = (await call('POST', REASONS, { name: 'Guarded' })).json();
      const wrong = await wrongCredentials(t, account, 'settings');
      const without = await t.createAccount({ modules: ['crm'] });
      const routes = [
        ['GET', REASONS, undefined],
        ['POST', REASONS, { name: 'Refused' }],
        ['DELETE', `${REASONS}/${reason.id}`, undefined],
      ] as const;
      await expectRefusedCredentials(t, routes, wrong, without);
      const names = (await call('GET', REASONS)).json().return_reasons.map((r: { name: string }) => r.name);
      expect(names).toContain('Guarded');
      expect(names).not.toContain('Refused');
    });

    it("treats another account's reason as not found and never lists it", async () => {
      const other = await distributionAccount(t);
      const theirs = (await call('POST', REASONS, { name: 'Theirs' }, other.apiKey)).json();
      expect((await call('DELETE', `${REASONS}/${theirs.id}`)).statusCode).toBe(404);
      expect(
        (await call('GET', REASONS)).json().return_reasons.map((r: { id: string }) => r.id),
      ).not.toContain(theirs.id);
      expect((await call('GET', REASONS, undefined, other.apiKey)).json().return_reasons).toEqual([theirs]);
      // Names are the account's own.
      expect((await call('POST', REASONS, { name: 'Theirs' })).statusCode).toBe(201);
    });
  });
});
