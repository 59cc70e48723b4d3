import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';

/**
 * Cursor pages of the lists ordered by creation time and id (decisions §6), through the one row
 * comparison they share (src/db/keyset.ts): rows created in the same millisecond are ordered by
 * id, and a page of one row at a time lists each exactly once.
 */
describe.each(TEST_DATABASES)('cursor pages of lists in creation order on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await t.createAccount({ modules: ['booking'] });
  });
  afterAll(async () => t?.close());

  const lists = [
    {
      table: 'users',
      path: '/api/v1/settings/users',
      field: 'users',
      body: (i: number) => ({ email: `pager${i}@example.com`, name: `Pager ${i}` }),
    },
    {
      table: 'api_keys',
      path: '/api/v1/settings/api-keys',
      field: 'api_keys',
      body: (i: number) => ({ name: `Pager ${i}` }),
    },
    {
      table: 'sources',
      path: '/api/v1/settings/sources',
      field: 'sources',
      body: (i: number) => ({ name: `Pager ${i}` }),
    },
    {
      table: 'calendars',
      path: '/api/v1/settings/booking/calendars',
      field: 'calendars',
      body: (i: number) => ({
        name: `Pager ${i}`,
        time_zone: 'Europe/Berlin',
        weekly: { mon: [['09:00', '17:00']] },
      }),
    },
  ] as const;

  describe('happy path', () => {
    it.each(lists)(
      '$path: rows of one millisecond come in id order, one page each, none twice',
      async (list) => {
        for (let i = 0; i < 4; i++) {
          const created = await t.request({
            method: 'POST',
            url: list.path,
            key: account.apiKey,
            body: list.body(i),
          });
          expect(created.statusCode, created.body).toBe(201);
        }
        // Every row of the list shares one creation time: only the id orders them.
        await sql`UPDATE ${sql.table(list.table)} SET created_at = '2026-01-02T03:04:05.678Z'
        WHERE account_id = ${account.id}`.execute(t.db);
        const all = await t.request({ method: 'GET', url: `${list.path}?limit=100`, key: account.apiKey });
        const ids: string[] = all.json()[list.field].map((row: { id: string }) => row.id);
        expect(ids.length).toBeGreaterThanOrEqual(4);
        expect(ids).toEqual([...ids].sort());
        const paged: string[] = [];
        let cursor: string | null = null;
        do {
          const page = await t.request({
            method: 'GET',
            url: `${list.path}?limit=1${cursor ? `&cursor=${cursor}` : ''}`,
            key: account.apiKey,
          });
          expect(page.statusCode).toBe(200);
          expect(page.json()[list.field]).toHaveLength(1);
          paged.push(page.json()[list.field][0].id);
          cursor = page.json().next_cursor;
        } while (cursor !== null && paged.length <= ids.length);
        expect(paged).toEqual(ids);
      },
    );
  });
});
