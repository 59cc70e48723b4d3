import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, putEntity } from '../helpers/fixtures.ts';

/** The list's filters for screens (decisions: Records): stage, source, creation time, text, order. */
describe.each(TEST_DATABASES)('filters of GET /api/v1/records on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let other: TestAccount;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t, { modules: ['crm'] });
    other = await accountWithLeads(t, { modules: ['crm'] });
    await putEntity(t, account, 'partner_lead', {
      name: 'Partner lead',
      fields: [{ key: 'email', label: 'Email', type: 'text', format: 'email', role: 'email' }],
    });
    const create = async (name: string, body: object, who = account) => {
      const response = await t.request({ method: 'POST', url: '/api/v1/records', key: who.apiKey, body });
      expect(response.statusCode, response.body).toBe(201);
      ids[name] = response.json().id;
    };
    await create('anna', {
      entity: 'lead',
      fields: { email: 'Anna.Berg@Example.com', first_name: 'Anna', last_name: 'Berg' },
      meta: { source: 'website' },
    });
    await create('bernd', {
      entity: 'lead',
      fields: { email: 'bernd@shop.de', company: 'Bernd 100% GmbH' },
      crm: { stage: 'Contacted' },
      meta: { source: 'facebook' },
    });
    await create('carla', {
      entity: 'lead',
      fields: { email: 'carla_x@web.de', first_name: 'Carla' },
      crm: { stage: 'Won' },
      meta: { source: 'website' },
    });
    await create('dora', { entity: 'partner_lead', fields: { email: 'dora@partner.io' } });
    await create('foreign', { entity: 'lead', fields: { email: 'anna@other.example' } }, other);
    // Written with its accents as separate marks (u + U+0308, as some systems send it).
    await create(
      'decomposed',
      {
        entity: 'lead',
        fields: { email: 'J\u006f\u0308rg@web.example', last_name: 'Mu\u0308ller' },
      },
      other,
    );
    // Creation times the date filters can tell apart: Anna on 1 March, Bernd on 2 March (UTC).
    const setCreated = (id: string, at: string) =>
      sql`UPDATE records SET created_at = ${at}::timestamptz WHERE id = ${id}::uuid`.execute(t.db);
    await setCreated(ids.anna!, '2024-03-01T10:00:00Z');
    await setCreated(ids.bernd!, '2024-03-02T23:59:59.500Z');
    await setCreated(ids.carla!, '2024-03-03T00:00:00Z');
    await setCreated(ids.dora!, '2024-03-04T12:00:00Z');
  });
  afterAll(async () => t?.close());

  const list = async (query: string, key = account.apiKey) => {
    const response = await t.request({ method: 'GET', url: `/api/v1/records?${query}`, key });
    return response;
  };
  const names = async (query: string) => {
    const response = await list(query);
    expect(response.statusCode, response.body).toBe(200);
    const byId = Object.fromEntries(Object.entries(ids).map(([name, id]) => [id, name]));
    return (response.json().records as { id: string }[]).map((r) => byId[r.id]);
  };

  describe('happy path', () => {
    it('filters by stage and pipeline, by source, and combines filters', async () => {
      expect(await names('stage=Contacted&order=newest')).toEqual(['bernd']);
      expect(await names('stage=Won&pipeline=Sales')).toEqual(['carla']);
      expect(await names('stage=Won&pipeline=Other')).toEqual([]);
      expect(await names('stage=New')).toEqual(['anna']);
      expect(await names('source=website&order=newest')).toEqual(['carla', 'anna']);
      expect(await names('source=website&stage=Won')).toEqual(['carla']);
      expect(await names('entity=partner_lead')).toEqual(['dora']);
    });

    it('filters by creation time: a date is its whole UTC day, a timestamp the instant', async () => {
      expect(await names('created_from=2024-03-02&created_to=2024-03-02')).toEqual(['bernd']);
      expect(await names('created_from=2024-03-02&order=newest')).toEqual(['dora', 'carla', 'bernd']);
      expect(await names('created_to=2024-03-02&order=newest')).toEqual(['bernd', 'anna']);
      expect(await names('created_to=2024-03-02T23:59:59.500Z&order=newest')).toEqual(['bernd', 'anna']);
      expect(await names('created_to=2024-03-02T23:59:59Z')).toEqual(['anna']);
      expect(await names('created_from=2024-03-03T00:00:00%2B01:00&created_to=2024-03-03')).toEqual([
        'bernd',
        'carla',
      ]);
    });

    it('reads an offset whose + the query string decoded as a space (sent unescaped) as that +', async () => {
      // `+01:00` typed into an address arrives as ` 01:00`: the same instant as `%2B01:00`.
      expect(await names('created_from=2024-03-03T00:00:00+01:00&created_to=2024-03-03')).toEqual([
        'bernd',
        'carla',
      ]);
      expect(await names('created_to=2024-03-03T00:59:59.5+01:00&order=newest')).toEqual(['bernd', 'anna']);
      expect(await names('created_to=2024-03-03+00:59:59.5+0100&order=newest')).toEqual(['bernd', 'anna']);
      expect(await names('created_from=2024-03-03T00:00:00-01:00')).toEqual(['dora']);
      const since = new Date(Date.now() + 3_600_000).toISOString().replace('Z', '+00:00');
      expect(await names(`updated_since=${since}`)).toEqual([]);
    });

    it('finds text in the name or the email address, in any case, with LIKE characters taken literally', async () => {
      expect(await names('q=berg')).toEqual(['anna']);
      expect(await names('q=ANNA.BERG%40EXAMPLE')).toEqual(['anna']);
      expect(await names('q=shop.de')).toEqual(['bernd']);
      expect(await names(`q=${encodeURIComponent('100%')}`)).toEqual(['bernd']);
      expect(await names('q=carla_')).toEqual(['carla']);
      expect(await names('q=a_x')).toEqual(['carla']);
      expect(await names(`q=${encodeURIComponent('%')}`)).toEqual(['bernd']);
      expect(await names('q=_')).toEqual(['carla']);
      expect(await names('q=nobody')).toEqual([]);
    });

    it('finds text however its accented letters are written (composed or as separate marks)', async () => {
      const found = async (text: string) => {
        const response = await list(`q=${encodeURIComponent(text)}`, other.apiKey);
        expect(response.statusCode, response.body).toBe(200);
        return (response.json().records as { id: string }[]).map((r) => r.id);
      };
      // The name and the email address were written decomposed; searched composed and not.
      expect(await found('M\u00fcller')).toEqual([ids.decomposed]);
      expect(await found('mu\u0308ll')).toEqual([ids.decomposed]);
      expect(await found('j\u00f6rg@')).toEqual([ids.decomposed]);
      expect(await found('mueller')).toEqual([]);
    });

    it('orders newest first with order=newest and pages through it with the cursor', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const response = await list(`order=newest&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
        expect(response.statusCode).toBe(200);
        const page = response.json();
        expect(page.records.length).toBeLessThanOrEqual(1);
        seen.push(...page.records.map((r: { id: string }) => r.id));
        cursor = page.next_cursor;
      } while (cursor);
      expect(seen).toEqual([ids.dora, ids.carla, ids.bernd, ids.anna]);
      // The default stays the polling order: oldest change first.
      expect((await names('')).length).toBe(4);
    });

    it('polls with updated_since and the filters together: a change shows up once it matches', async () => {
      const since = new Date().toISOString();
      expect(await names(`updated_since=${since}&stage=Won`)).toEqual([]);
      const moved = await t.request({
        method: 'POST',
        url: `/api/v1/crm/records/${ids.anna}/stage`,
        key: account.apiKey,
        body: { stage: 'Won' },
      });
      expect(moved.statusCode, moved.body).toBe(200);
      expect(await names(`updated_since=${since}&stage=Won`)).toEqual(['anna']);
    });
  });

  describe('errors', () => {
    it('refuses values out of their bounds with 422 naming the parameter', async () => {
      const refused: [string, string][] = [
        ['q=', 'q'],
        // An empty entity filter is refused as every empty filter is, not read as no filter.
        ['entity=', 'entity'],
        [`q=${'x'.repeat(201)}`, 'q'],
        [`stage=${'s'.repeat(101)}`, 'stage'],
        [`source=${'s'.repeat(201)}`, 'source'],
        ['created_from=yesterday', 'created_from'],
        ['created_to=2024-13-01', 'created_to'],
        ['order=oldest', 'order'],
        ['created_from=0000-01-01T00:00:00Z', 'created_from'],
        // Only a time's offset is read back as a `+`: two spaces, or a space elsewhere, stay refused.
        ['created_from=2024-03-03T00:00:00++01:00', 'created_from'],
        ['created_from=2024-03-03T00:00+:00+01:00', 'created_from'],
        ['updated_since=2024-03-03T00:00:00', 'updated_since'],
        [`updated_since=2024-03-03T00:00:00.${'1'.repeat(60)}Z`, 'updated_since'],
      ];
      for (const [query, key] of refused) {
        const response = await list(query);
        expect(response.statusCode, query).toBe(422);
        expect(response.json().error, query).toBe('validation_failed');
        expect(JSON.stringify(response.json().details), query).toContain(key);
      }
    });

    it('refuses a cursor issued for the other order instead of reading it as a position there', async () => {
      for (const [issued, asked] of [
        ['newest', 'updated'],
        ['updated', 'newest'],
      ] as const) {
        const first = (await list(`order=${issued}&limit=1`)).json();
        expect(first.next_cursor).toEqual(expect.any(String));
        const other = await list(`order=${asked}&limit=1&cursor=${first.next_cursor}`);
        expect(other.statusCode, issued).toBe(422);
        expect(other.json().details).toEqual([
          {
            key: 'cursor',
            reason: 'invalid_format',
            message: `cursor was issued for order=${issued}; ask for that order, or start again without a cursor`,
          },
        ]);
        expect((await list(`order=${issued}&limit=1&cursor=${first.next_cursor}`)).statusCode).toBe(200);
      }
      // A cursor issued before orders were written into cursors ([timestamp, id]) is read as before.
      const legacy = Buffer.from(JSON.stringify(['2024-03-02T00:00:00.000Z', ids.anna])).toString(
        'base64url',
      );
      expect((await list(`order=newest&cursor=${legacy}`)).statusCode).toBe(200);
    });

    it('answers an unknown entity as before', async () => {
      const response = await list('entity=nothing');
      expect(response.statusCode).toBe(404);
      expect(response.json().error).toBe('unknown_entity');
    });
  });

  describe('security', () => {
    it("never lists another account's records, whatever the filter", async () => {
      for (const query of ['q=anna', 'source=api', 'created_from=2000-01-01', 'stage=New']) {
        const response = await list(query, other.apiKey);
        expect(response.statusCode).toBe(200);
        const listed = (response.json().records as { id: string }[]).map((r) => r.id);
        expect(
          listed.every((id) => id === ids.foreign || id === ids.decomposed),
          query,
        ).toBe(true);
      }
      expect((await list('q=other.example')).json().records).toEqual([]);
    });

    it('needs a key with records:read', async () => {
      expect((await t.request({ method: 'GET', url: '/api/v1/records?q=anna' })).statusCode).toBe(401);
    });
  });
});
