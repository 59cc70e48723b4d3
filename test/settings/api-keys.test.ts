import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { PERMISSIONS } from '../../src/http/auth.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';

describe.each(TEST_DATABASES)('settings: API keys on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await t.createAccount();
  });
  afterAll(async () => t?.close());

  const call = (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    body?: unknown,
    key = account.apiKey,
  ) => t.request({ method, url, key, body });

  describe('happy path', () => {
    it('creates a key shown once, lists keys without values, renames and switches strict mode', async () => {
      const created = await call('POST', '/api/v1/settings/api-keys', { name: 'Website form', strict: true });
      expect(created.statusCode).toBe(201);
      const key = created.json();
      expect(key).toMatchObject({ name: 'Website form', strict: true, prefix: key.key.slice(0, 10) });
      expect(key.permissions).toContain('records:write');
      const list = await call('GET', '/api/v1/settings/api-keys');
      expect(list.statusCode).toBe(200);
      expect(list.body).not.toContain(key.key);
      expect(list.json().api_keys.map((k: { id: string }) => k.id)).toContain(key.id);
      const patched = await call('PATCH', `/api/v1/settings/api-keys/${key.id}`, {
        name: 'Form',
        strict: false,
      });
      expect(patched.json()).toMatchObject({ id: key.id, name: 'Form', strict: false });
      // The database keeps a hash, never the key.
      const row = await t.db
        .selectFrom('api_keys')
        .selectAll()
        .where('id', '=', key.id)
        .executeTakeFirstOrThrow();
      expect(JSON.stringify(row)).not.toContain(key.key.slice(10));
    });

    it('gives a key only the permissions asked for', async () => {
      const reader = (
        await call('POST', '/api/v1/settings/api-keys', { name: 'Reader', permissions: ['records:read'] })
      ).json();
      expect(reader.permissions).toEqual(['records:read']);
      const forbidden = await call('GET', '/api/v1/settings/api-keys', undefined, reader.key);
      expect(forbidden.statusCode).toBe(403);
      expect(forbidden.json()).toEqual({ error: 'forbidden' });
      const allowed = await call('GET', '/api/v1/entities', undefined, reader.key);
      expect(allowed.statusCode).toBe(200);
    });
  });

  describe('errors', () => {
    it('refuses unknown permissions, empty names and unknown ids', async () => {
      expect(
        (await call('POST', '/api/v1/settings/api-keys', { name: 'X', permissions: ['root'] })).statusCode,
      ).toBe(422);
      expect((await call('POST', '/api/v1/settings/api-keys', { name: '' })).statusCode).toBe(422);
      const missing = '00000000-0000-4000-8000-000000000000';
      expect((await call('PATCH', `/api/v1/settings/api-keys/${missing}`, { name: 'x' })).statusCode).toBe(
        404,
      );
      expect((await call('DELETE', `/api/v1/settings/api-keys/${missing}`)).statusCode).toBe(404);
    });

    it('refuses an empty permission list and a permission named twice, and makes no key', async () => {
      const before = (await call('GET', '/api/v1/settings/api-keys?limit=500')).json().api_keys.length;
      const empty = await call('POST', '/api/v1/settings/api-keys', { name: 'Nothing', permissions: [] });
      expect(empty.statusCode).toBe(422);
      expect(empty.json()).toEqual({
        error: 'validation_failed',
        details: [{ key: 'permissions', reason: 'out_of_range', message: expect.any(String) }],
      });
      const twice = await call('POST', '/api/v1/settings/api-keys', {
        name: 'Twice',
        permissions: ['settings', 'records:read', 'settings'],
      });
      expect(twice.statusCode).toBe(422);
      expect(twice.json()).toEqual({
        error: 'validation_failed',
        details: [{ key: 'permissions', reason: 'duplicate', message: expect.any(String) }],
      });
      expect((await call('GET', '/api/v1/settings/api-keys?limit=500')).json().api_keys).toHaveLength(before);
    });

    it('refuses a key name of blanks only, on creation and rename, and keeps blanks around text', async () => {
      const before = (await call('GET', '/api/v1/settings/api-keys')).json().api_keys.length;
      // Blanks, an empty name, and characters that show nothing (zero-width space, BOM, soft hyphen).
      for (const name of ['   ', '\t', '\r\n', '', '\u200B', ' \uFEFF\u00AD ']) {
        const refused = await call('POST', '/api/v1/settings/api-keys', { name });
        expect(refused.statusCode, JSON.stringify(name)).toBe(422);
        expect(refused.json().details).toEqual([
          { key: 'name', reason: 'required', message: 'must hold a character other than blanks' },
        ]);
      }
      expect((await call('GET', '/api/v1/settings/api-keys')).json().api_keys).toHaveLength(before);
      const key = (await call('POST', '/api/v1/settings/api-keys', { name: ' Spaced ' })).json();
      expect(key.name).toBe(' Spaced ');
      const renamed = await call('PATCH', `/api/v1/settings/api-keys/${key.id}`, { name: ' ' });
      expect(renamed.statusCode).toBe(422);
      expect(renamed.json().details[0]).toMatchObject({ key: 'name', reason: 'required' });
      const listed = (await call('GET', '/api/v1/settings/api-keys')).json().api_keys;
      expect(listed.find((k: { id: string }) => k.id === key.id).name).toBe(' Spaced ');
    });
  });

  describe('security', () => {
    it('revokes a key at once, and a revoked key is gone from the list', async () => {
      const key = (await call('POST', '/api/v1/settings/api-keys', { name: 'Temp' })).json();
      expect((await call('DELETE', `/api/v1/settings/api-keys/${key.id}`)).statusCode).toBe(204);
      expect((await call('GET', '/api/v1/entities', undefined, key.key)).statusCode).toBe(401);
      const list = (await call('GET', '/api/v1/settings/api-keys')).json();
      expect(list.api_keys.map((k: { id: string }) => k.id)).not.toContain(key.id);
      expect((await call('DELETE', `/api/v1/settings/api-keys/${key.id}`)).statusCode).toBe(404);
    });

    it('lets a key give only the permissions it holds, and by default exactly those', async () => {
      const settingsOnly = (
        await call('POST', '/api/v1/settings/api-keys', { name: 'Admin tool', permissions: ['settings'] })
      ).json();
      expect(settingsOnly.permissions).toEqual(['settings']);
      const byIt = (body: unknown) => call('POST', '/api/v1/settings/api-keys', body, settingsOnly.key);
      // Asking for more than it holds is refused, and no key is made.
      const before = (await call('GET', '/api/v1/settings/api-keys?limit=500')).json().api_keys.length;
      const broader = await byIt({ name: 'Broader', permissions: ['settings', 'records:read'] });
      expect(broader.statusCode).toBe(403);
      expect(broader.json()).toEqual({ error: 'forbidden' });
      const writer = await byIt({ name: 'Writer', permissions: ['records:write'] });
      expect(writer.statusCode).toBe(403);
      expect((await call('GET', '/api/v1/settings/api-keys?limit=500')).json().api_keys).toHaveLength(before);
      // Without `permissions` the new key gets the maker's, not all of them: it cannot read records.
      const defaulted = await byIt({ name: 'Defaulted' });
      expect(defaulted.statusCode).toBe(201);
      expect(defaulted.json().permissions).toEqual(['settings']);
      const reading = await call('GET', '/api/v1/records', undefined, defaulted.json().key);
      expect(reading.statusCode).toBe(403);
      expect(reading.json()).toEqual({ error: 'forbidden' });
      // A subset of the maker's permissions is given as asked.
      const both = (
        await call('POST', '/api/v1/settings/api-keys', {
          name: 'Both',
          permissions: ['settings', 'records:read'],
        })
      ).json();
      const subset = await call(
        'POST',
        '/api/v1/settings/api-keys',
        { name: 'Reader', permissions: ['records:read'] },
        both.key,
      );
      expect(subset.statusCode).toBe(201);
      expect(subset.json().permissions).toEqual(['records:read']);
      expect((await call('GET', '/api/v1/records', undefined, subset.json().key)).statusCode).toBe(200);
      const all = await call('POST', '/api/v1/settings/api-keys', { name: 'Same' }, both.key);
      expect(all.json().permissions).toEqual(['records:read', 'settings']);
    });

    it('lets only a key holding every permission manage users: a settings key cannot make an owner', async () => {
      // The account's first key may manage users, and holds every permission.
      const fresh = await t.createAccount();
      const byFirst = (body: unknown) => call('POST', '/api/v1/settings/api-keys', body, fresh.apiKey);
      const settingsOnly = (await byFirst({ name: 'Settings', permissions: ['settings'] })).json();
      expect(settingsOnly.manages_users).toBe(false);
      const allButOne = (
        await byFirst({ name: 'Most', permissions: PERMISSIONS.filter((p) => p !== 'documents:read') })
      ).json();
      expect(allButOne.manages_users).toBe(false);
      const full = (await byFirst({ name: 'Full', permissions: [...PERMISSIONS].reverse() })).json();
      expect(full.manages_users).toBe(true);
      expect((await byFirst({ name: 'Defaulted' })).json().manages_users).toBe(true);
      // Neither narrower key may add an owner (who could then sign in and do everything).
      for (const key of [settingsOnly.key, allButOne.key]) {
        const owner = await call(
          'POST',
          '/api/v1/settings/users',
          { email: `${randomUUID()}@keys.test`, name: 'Sneaky', role: 'owner' },
          key,
        );
        expect(owner.statusCode).toBe(403);
        expect(owner.json()).toEqual({ error: 'forbidden' });
      }
      expect(
        (await t.db.selectFrom('users').select('id').where('account_id', '=', fresh.id).execute()).length,
      ).toBe(0);
      const added = await call(
        'POST',
        '/api/v1/settings/users',
        { email: `${randomUUID()}@keys.test`, name: 'Real owner', role: 'owner' },
        full.key,
      );
      expect(added.statusCode).toBe(201);
      // A key made by the narrow key cannot manage users either, whatever it asks for.
      const second = await call('POST', '/api/v1/settings/api-keys', { name: 'Second' }, settingsOnly.key);
      expect(second.json().manages_users).toBe(false);
    });

    it('takes managing users from narrower keys made before (migration 0029)', async () => {
      const fresh = await t.createAccount();
      const byFirst = (body: unknown) => call('POST', '/api/v1/settings/api-keys', body, fresh.apiKey);
      const narrow = (await byFirst({ name: 'Narrow', permissions: ['settings'] })).json();
      const full = (await byFirst({ name: 'Full' })).json();
      // As such keys were made before: allowed to manage users with fewer permissions.
      await t.db
        .updateTable('api_keys')
        .set({ manages_users: true })
        .where('account_id', '=', fresh.id)
        .execute();
      await sql`DELETE FROM schema_migrations WHERE name = '0029_api_key_manages_users_full.sql'`.execute(
        t.db,
      );
      expect((await migrate(t.db)).applied).toEqual(['0029_api_key_manages_users_full.sql']);
      const rows = await t.db
        .selectFrom('api_keys')
        .select(['name', 'manages_users'])
        .where('account_id', '=', fresh.id)
        .execute();
      const managing = Object.fromEntries(rows.map((row) => [row.name, row.manages_users]));
      expect(managing).toEqual({ 'Initial key': true, [narrow.name]: false, [full.name]: true });
    });

    it("answers 404 for another account's key, and never revokes it", async () => {
      const other = await t.createAccount();
      const theirs = (
        await call('POST', '/api/v1/settings/api-keys', { name: 'Theirs' }, other.apiKey)
      ).json();
      expect((await call('DELETE', `/api/v1/settings/api-keys/${theirs.id}`)).statusCode).toBe(404);
      expect((await call('PATCH', `/api/v1/settings/api-keys/${theirs.id}`, { name: 'x' })).statusCode).toBe(
        404,
      );
      expect((await call('GET', '/api/v1/entities', undefined, theirs.key)).statusCode).toBe(200);
    });
  });
});
