import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';

describe.each(TEST_DATABASES)('settings: webhooks on %s', (kind) => {
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

  const create = (body: object = {}) =>
    call('POST', '/api/v1/settings/webhooks', {
      url: 'https://hooks.example.com/leads',
      events: ['record.created'],
      ...body,
    });

  describe('happy path', () => {
    it('creates a webhook with its secret shown once, reads, lists, changes and deletes it', async () => {
      const created = await create({ description: 'CRM sync', events: ['record.created', 'note.added'] });
      expect(created.statusCode).toBe(201);
      const webhook = created.json();
      expect(webhook).toMatchObject({
        url: 'https://hooks.example.com/leads',
        events: ['record.created', 'note.added'],
        description: 'CRM sync',
        enabled: true,
      });
      expect(webhook.secret).toMatch(/^whsec_[A-Za-z0-9+/=]{32}$/);
      const read = await call('GET', `/api/v1/settings/webhooks/${webhook.id}`);
      expect(read.statusCode).toBe(200);
      expect(read.json()).not.toHaveProperty('secret');
      const list = await call('GET', '/api/v1/settings/webhooks');
      expect(list.json().webhooks.map((w: { id: string }) => w.id)).toContain(webhook.id);
      expect(list.body).not.toContain(webhook.secret);
      const patched = await call('PATCH', `/api/v1/settings/webhooks/${webhook.id}`, {
        url: 'https://other.example.com/in',
        events: ['*'],
        description: null,
        enabled: false,
      });
      expect(patched.statusCode).toBe(200);
      expect(patched.json()).toMatchObject({
        url: 'https://other.example.com/in',
        events: ['*'],
        description: null,
        enabled: false,
        disabled_reason: 'by_user',
      });
      expect(patched.json()).not.toHaveProperty('secret');
      expect((await call('DELETE', `/api/v1/settings/webhooks/${webhook.id}`)).statusCode).toBe(204);
      expect((await call('GET', `/api/v1/settings/webhooks/${webhook.id}`)).statusCode).toBe(404);
    });

    it('pages through webhooks with the cursor and lists attempts (none yet)', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        ids.push((await create({ url: `https://hooks.example.com/${i}` })).json().id);
      }
      const first = await call('GET', '/api/v1/settings/webhooks?limit=2');
      expect(first.json().webhooks).toHaveLength(2);
      const second = await call(
        'GET',
        `/api/v1/settings/webhooks?limit=2&cursor=${first.json().next_cursor}`,
      );
      const seen = [...first.json().webhooks, ...second.json().webhooks].map((w: { id: string }) => w.id);
      for (const id of ids) expect(seen).toContain(id);
      const attempts = await call('GET', `/api/v1/settings/webhooks/${ids[0]}/attempts`);
      expect(attempts.json()).toEqual({ attempts: [], next_cursor: null });
    });
  });

  describe('errors', () => {
    it('refuses unknown events, bad URLs and unknown fields with 422', async () => {
      const unknown = await create({ events: ['record.created', 'record.exploded'] });
      expect(unknown.statusCode).toBe(422);
      expect(unknown.json().details).toEqual([
        { key: 'events', reason: 'not_allowed', message: 'unknown event record.exploded' },
      ]);
      expect((await create({ events: [] })).statusCode).toBe(422);
      expect((await create({ url: 'ftp://example.com/x' })).statusCode).toBe(422);
      expect((await create({ url: 'https://user:pw@example.com/x' })).statusCode).toBe(422);
      expect((await create({ url: 'not a url' })).statusCode).toBe(422);
      expect((await create({ secret: 'whsec_mine' })).statusCode).toBe(422);
      const id = (await create()).json().id;
      expect((await call('PATCH', `/api/v1/settings/webhooks/${id}`, { events: ['nope'] })).statusCode).toBe(
        422,
      );
    });

    it('refuses `*` beside named events and a name given twice, on POST and PATCH alike', async () => {
      const id = (await create()).json().id;
      for (const [events, reason] of [
        [['*', 'note.added'], 'not_allowed'],
        [['note.added', '*'], 'not_allowed'],
        [['note.added', 'note.added'], 'duplicate'],
        [['*', '*'], 'duplicate'],
      ] as const) {
        const created = await create({ events });
        expect([events, created.statusCode, created.json().details]).toEqual([
          events,
          422,
          [expect.objectContaining({ key: 'events', reason })],
        ]);
        const patched = await call('PATCH', `/api/v1/settings/webhooks/${id}`, { events });
        expect([events, patched.statusCode, patched.json().details]).toEqual([
          events,
          422,
          [expect.objectContaining({ key: 'events', reason })],
        ]);
      }
      expect((await call('GET', `/api/v1/settings/webhooks/${id}`)).json().events).toEqual([
        'record.created',
      ]);
      expect((await create({ events: ['*'] })).json().events).toEqual(['*']);
    });

    it('refuses a URL not written as one: blanks around it, one slash, a backslash; nothing is trimmed', async () => {
      const id = (await create()).json().id;
      for (const url of [
        '  http://127.0.0.1:4743/h  ',
        'http://127.0.0.1:4743/h ',
        '\thttps://hooks.example.com/x',
        'http:/127.0.0.1:4743/h',
        'http:127.0.0.1:4743/h',
        'http:///127.0.0.1:4743/h',
        'http:\\\\127.0.0.1:4743\\h',
        'https://hooks.example.com/a b',
        'https://hooks.example.com/a\nb',
      ]) {
        const created = await create({ url });
        expect([url, created.statusCode, created.json().details]).toEqual([
          url,
          422,
          [expect.objectContaining({ key: 'url', reason: 'invalid_format' })],
        ]);
        const patched = await call('PATCH', `/api/v1/settings/webhooks/${id}`, { url });
        expect([url, patched.statusCode]).toEqual([url, 422]);
      }
      expect((await call('GET', `/api/v1/settings/webhooks/${id}`)).json().url).toBe(
        'https://hooks.example.com/leads',
      );
      // Written as URLs are: taken as sent.
      for (const url of [
        'HTTPS://Hooks.Example.com:8443/in?x=1#f',
        'http://[::1]:4743/h',
        'https://bücher.example/in',
      ]) {
        const created = await create({ url });
        expect([url, created.statusCode, created.json().url]).toEqual([url, 201, url]);
      }
    });

    it('refuses a webhook beyond 50 per account, also when several are created at once', async () => {
      const own = await t.createAccount();
      const add = (i: number) =>
        t.request({
          method: 'POST',
          url: '/api/v1/settings/webhooks',
          key: own.apiKey,
          body: { url: `https://hooks.example.com/${i}`, events: ['*'] },
        });
      for (let i = 0; i < 46; i++) expect((await add(i)).statusCode).toBe(201);
      const answers = await Promise.all([46, 47, 48, 49, 50, 51, 52, 53].map(add));
      expect(answers.map((r) => r.statusCode).sort()).toEqual([201, 201, 201, 201, 422, 422, 422, 422]);
      const refused = answers.find((r) => r.statusCode === 422)!;
      expect(refused.json().details).toEqual([
        { key: 'url', reason: 'too_many', message: 'at most 50 webhooks per account' },
      ]);
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM webhook_destinations WHERE account_id = ${own.id}`.execute(t.db);
      expect(rows[0]!.n).toBe(50);
    });

    it('answers 404 for unknown ids on every route', async () => {
      const missing = '00000000-0000-4000-8000-000000000000';
      for (const [method, url] of [
        ['GET', `/api/v1/settings/webhooks/${missing}`],
        ['PATCH', `/api/v1/settings/webhooks/${missing}`],
        ['DELETE', `/api/v1/settings/webhooks/${missing}`],
        ['POST', `/api/v1/settings/webhooks/${missing}/test`],
        ['GET', `/api/v1/settings/webhooks/${missing}/attempts`],
      ] as const) {
        const response = await call(method, url, method === 'PATCH' ? { enabled: true } : undefined);
        expect(response.statusCode, `${method} ${url}`).toBe(404);
      }
    });
  });

  describe('security', () => {
    it('needs an API key with the settings permission', async () => {
      expect((await t.request({ method: 'GET', url: '/api/v1/settings/webhooks' })).statusCode).toBe(401);
      expect((await call('GET', '/api/v1/settings/webhooks', undefined, 'lk_wrong')).statusCode).toBe(401);
      expect((await call('GET', '/api/v1/settings/webhooks', undefined, ADMIN_TOKEN)).statusCode).toBe(401);
      const reader = (
        await call('POST', '/api/v1/settings/api-keys', { name: 'Reader', permissions: ['records:read'] })
      ).json();
      const forbidden = await call(
        'POST',
        '/api/v1/settings/webhooks',
        { url: 'https://x.example', events: ['*'] },
        reader.key,
      );
      expect(forbidden.statusCode).toBe(403);
      expect(forbidden.json()).toEqual({ error: 'forbidden' });
    });

    it('needs records:read beside settings to subscribe or change a webhook: its events carry records', async () => {
      const settingsOnly = (
        await call('POST', '/api/v1/settings/api-keys', { name: 'Admin', permissions: ['settings'] })
      ).json().key;
      const refused = await call(
        'POST',
        '/api/v1/settings/webhooks',
        { url: 'https://steal.example/x', events: ['*'] },
        settingsOnly,
      );
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toEqual({ error: 'forbidden' });
      const existing = (await create({ url: 'https://hooks.example.com/kept' })).json();
      const moved = await call(
        'PATCH',
        `/api/v1/settings/webhooks/${existing.id}`,
        { url: 'https://steal.example/x' },
        settingsOnly,
      );
      expect(moved.statusCode).toBe(403);
      expect((await call('GET', `/api/v1/settings/webhooks/${existing.id}`)).json().url).toBe(
        'https://hooks.example.com/kept',
      );
      // Listing, reading and removing stay the settings permission's.
      expect((await call('GET', '/api/v1/settings/webhooks', undefined, settingsOnly)).statusCode).toBe(200);
      expect(
        (await call('DELETE', `/api/v1/settings/webhooks/${existing.id}`, undefined, settingsOnly))
          .statusCode,
      ).toBe(204);
      const both = (
        await call('POST', '/api/v1/settings/api-keys', {
          name: 'Integrator',
          permissions: ['settings', 'records:read'],
        })
      ).json().key;
      expect(
        (
          await call(
            'POST',
            '/api/v1/settings/webhooks',
            { url: 'https://ok.example/x', events: ['*'] },
            both,
          )
        ).statusCode,
      ).toBe(201);
    });

    it("treats another account's webhook as not found", async () => {
      const other = await t.createAccount();
      const theirs = (
        await call(
          'POST',
          '/api/v1/settings/webhooks',
          { url: 'https://theirs.example/x', events: ['*'] },
          other.apiKey,
        )
      ).json();
      for (const [method, url] of [
        ['GET', `/api/v1/settings/webhooks/${theirs.id}`],
        ['PATCH', `/api/v1/settings/webhooks/${theirs.id}`],
        ['DELETE', `/api/v1/settings/webhooks/${theirs.id}`],
        ['POST', `/api/v1/settings/webhooks/${theirs.id}/test`],
        ['GET', `/api/v1/settings/webhooks/${theirs.id}/attempts`],
      ] as const) {
        const response = await call(method, url, method === 'PATCH' ? { rotate_secret: true } : undefined);
        expect(response.statusCode, `${method} ${url}`).toBe(404);
      }
      const list = (await call('GET', '/api/v1/settings/webhooks')).json();
      expect(list.webhooks.map((w: { id: string }) => w.id)).not.toContain(theirs.id);
      expect(
        (await call('GET', `/api/v1/settings/webhooks/${theirs.id}`, undefined, other.apiKey)).statusCode,
      ).toBe(200);
    });
  });
});
