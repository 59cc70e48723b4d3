import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, LEAD_ENTITY, putEntity } from '../helpers/fixtures.ts';
import { asPerson, personWithRole } from '../people/support.ts';

interface HistoryEvent {
  type: string;
  actor: { type: string; name: string };
  data: Record<string, unknown>;
}

/**
 * The creation entry of a record's history, and the notes that came with it, name who created
 * the record: the API key by its name, the source token's source, the signed-in person; on every
 * intake path (one statement, grouped statements, bulk, the transaction with its side effects).
 */
describe.each(TEST_DATABASES)('who created a record, in its history, on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
    // Duplicates are kept as new records: that creation goes through the transaction.
    await putEntity(t, account, 'contact', {
      ...LEAD_ENTITY,
      name: 'Contact',
      duplicate_rule: { match: ['email'], action: 'create' },
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  const history = async (id: string): Promise<HistoryEvent[]> => {
    const response = await t.request({
      method: 'GET',
      url: `/api/v1/records/${id}/history`,
      key: account.apiKey,
    });
    expect(response.statusCode, response.body).toBe(200);
    return response.json().events;
  };
  const creationOf = async (id: string) =>
    (await history(id)).find((event) => event.type === 'lead_created')!;
  const newKey = async (name: string): Promise<string> => {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/settings/api-keys',
      key: account.apiKey,
      body: { name },
    });
    expect(response.statusCode, response.body).toBe(201);
    return response.json().key;
  };
  const email = () => `c${Math.random().toString(36).slice(2)}@creators.test`;

  describe('happy path', () => {
    it('names the API key of a single creation, and of the note sent with it', async () => {
      const key = await newKey('Shop sync');
      const created = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key,
        body: { entity: 'lead', fields: { email: email() }, note: 'Called in' },
      });
      expect(created.statusCode, created.body).toBe(201);
      const events = await history(created.json().id);
      expect(events.find((event) => event.type === 'lead_created')!.actor).toEqual({
        type: 'api_key',
        name: 'Shop sync',
      });
      const note = events.find((event) => event.type === 'note_added')!;
      expect(note.actor).toEqual({ type: 'api_key', name: 'Shop sync' });
      expect(note.data).toMatchObject({ sender: 'api', sender_name: 'Shop sync' });
    });

    it('names each key of creations grouped into one statement', async () => {
      const keys = [await newKey('Grouped one'), await newKey('Grouped two')];
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          t.request({
            method: 'POST',
            url: '/api/v1/records',
            key: keys[i % 2],
            body: { entity: 'lead', fields: { email: email() }, ...(i % 3 === 0 ? { note: `n${i}` } : {}) },
          }),
        ),
      );
      for (const [i, answer] of answers.entries()) {
        expect(answer.statusCode, answer.body).toBe(201);
        const name = i % 2 === 0 ? 'Grouped one' : 'Grouped two';
        const events = await history(answer.json().id);
        expect(events.find((event) => event.type === 'lead_created')!.actor.name).toBe(name);
        if (i % 3 === 0) expect(events.find((event) => event.type === 'note_added')!.actor.name).toBe(name);
      }
    });

    it('names the key of every record of a bulk call, and of their notes', async () => {
      const key = await newKey('Nightly import');
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key,
        body: {
          records: Array.from({ length: 3 }, (_, i) => ({
            entity: 'lead',
            fields: { email: email() },
            ...(i === 1 ? { note: 'From the import' } : {}),
          })),
        },
      });
      expect(response.statusCode, response.body).toBe(200);
      const results: { id: string; created: boolean }[] = response.json().results;
      expect(results.map((result) => result.created)).toEqual([true, true, true]);
      for (const [i, result] of results.entries()) {
        const events = await history(result.id);
        expect(events.find((event) => event.type === 'lead_created')!.actor).toEqual({
          type: 'api_key',
          name: 'Nightly import',
        });
        if (i === 1) {
          expect(events.find((event) => event.type === 'note_added')!.actor.name).toBe('Nightly import');
        }
      }
    });

    it('names the key of a creation written in a transaction (a duplicate kept as a new record)', async () => {
      const key = await newKey('Duplicate keeper');
      const address = email();
      const ids: string[] = [];
      for (const note of ['first', 'second']) {
        const created = await t.request({
          method: 'POST',
          url: '/api/v1/records',
          key,
          body: { entity: 'contact', fields: { email: address }, note },
        });
        expect(created.statusCode, created.body).toBe(201);
        ids.push(created.json().id);
      }
      expect(new Set(ids).size).toBe(2);
      for (const id of ids) {
        const events = await history(id);
        expect(events.find((event) => event.type === 'lead_created')!.actor).toEqual({
          type: 'api_key',
          name: 'Duplicate keeper',
        });
        expect(events.find((event) => event.type === 'note_added')!.actor.name).toBe('Duplicate keeper');
      }
    });

    it("names a source token's source, not the meta.source the sender wrote", async () => {
      const source = await t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: account.apiKey,
        body: { name: 'Landing page' },
      });
      expect(source.statusCode, source.body).toBe(201);
      const created = await t.request({
        method: 'POST',
        url: `/api/v1/in/${source.json().token}`,
        body: { entity: 'lead', fields: { email: email() }, meta: { source: 'newsletter' } },
      });
      expect(created.statusCode, created.body).toBe(201);
      const record = await t.request({
        method: 'GET',
        url: `/api/v1/records/${created.json().id}`,
        key: account.apiKey,
      });
      expect(record.json().source).toBe('newsletter');
      expect((await creationOf(created.json().id)).actor).toEqual({ type: 'source', name: 'Landing page' });
    });

    it('names the signed-in person who created a record', async () => {
      const address = `maker-${Math.random().toString(36).slice(2, 8)}@people.test`;
      const session = await personWithRole(t, account, 'member', address);
      const created = await asPerson(t, session, {
        method: 'POST',
        url: '/api/v1/records',
        body: { entity: 'lead', fields: { email: email() } },
      });
      expect(created.statusCode, created.body).toBe(201);
      expect((await creationOf(created.json().id)).actor).toEqual({ type: 'user', name: address });
    });

    it('names the API key of a note added through the notes endpoint', async () => {
      const key = await newKey('Call center');
      const address = email();
      const created = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: address } },
      });
      expect(created.statusCode).toBe(201);
      for (const body of [{ record: created.json().id }, { email: address }]) {
        const note = await t.request({
          method: 'POST',
          url: '/api/v1/notes',
          key,
          body: { ...body, body: `note by ${Object.keys(body)[0]}` },
        });
        expect(note.statusCode, note.body).toBe(201);
      }
      const notes = (await history(created.json().id)).filter((event) => event.type === 'note_added');
      expect(notes).toHaveLength(2);
      for (const note of notes) {
        expect(note.actor).toEqual({ type: 'api_key', name: 'Call center' });
        expect(note.data).toMatchObject({ sender: 'api', sender_name: 'Call center' });
      }
    });
  });

  describe('records from before the creator was kept', () => {
    it('read as the API, or as their source when a source token created them', async () => {
      const created = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: email() } },
      });
      expect(created.statusCode).toBe(201);
      const id = created.json().id;
      expect((await creationOf(id)).actor).toEqual({ type: 'api_key', name: 'Initial key' });
      await t.db.updateTable('records').set({ created_by: null }).where('id', '=', id).execute();
      expect((await creationOf(id)).actor).toEqual({ type: 'api_key', name: 'API' });
    });
  });
});
