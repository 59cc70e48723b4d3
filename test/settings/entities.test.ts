import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('settings: entities and users, and the entity listings on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await t.createAccount({ modules: ['crm'] });
  });
  afterAll(async () => t?.close());

  const put = (key: string, body: unknown, apiKey = account.apiKey) =>
    t.request({ method: 'PUT', url: `/api/v1/settings/entities/${key}`, key: apiKey, body });
  const get = (url: string, apiKey = account.apiKey) => t.request({ method: 'GET', url, key: apiKey });
  const post = (url: string, body: unknown) => t.request({ method: 'POST', url, key: account.apiKey, body });

  describe('happy path', () => {
    it('creates an entity and shows it on both surfaces with the fields of the interface', async () => {
      const created = await put('lead', {
        ...LEAD_ENTITY,
        duplicate_rule: { match: ['email'], action: 'update' },
      });
      expect(created.statusCode).toBe(200);
      expect(created.json()).toMatchObject({
        key: 'lead',
        name: 'Lead',
        archived: false,
        duplicate_rule: { match: ['email'], action: 'update' },
        pipelines: [{ name: 'Sales', stages: ['New', 'Contacted', 'Won'] }],
      });

      const s2 = (await get('/api/v1/entities')).json();
      expect(s2.modules).toEqual(['crm']);
      const lead = s2.entities.find((e: { key: string }) => e.key === 'lead');
      expect(lead.fields.find((f: { key: string }) => f.key === 'email')).toEqual({
        key: 'email',
        label: 'E-Mail Address',
        type: 'text',
        format: 'email',
        required: true,
        role: 'email',
      });
      expect(lead.fields.find((f: { key: string }) => f.key === 'interest')).toMatchObject({
        type: 'select',
        options: ['Solar', 'Heat pump', 'Battery'],
        format: null,
        role: null,
      });

      for (const path of ['/api/entities', '/api/lead-objects']) {
        const s1 = (await get(path)).json();
        const entry = s1.find((e: { label: string }) => e.label === 'Lead');
        expect(entry.id).toMatch(/^[0-9a-f-]{36}$/);
        expect(entry.fields).toContainEqual(
          expect.objectContaining({ key: 'email', type: 'text', required: true }),
        );
      }
      const pipelines = (await get('/api/v1/crm/pipelines')).json();
      expect(pipelines.entities).toContainEqual({
        key: 'lead',
        pipelines: [{ name: 'Sales', stages: ['New', 'Contacted', 'Won'] }],
      });
    });

    it('replaces a definition: dropped stages and pipelines leave the listings, archived entities leave S1', async () => {
      await put('deal', {
        name: 'Deal',
        fields: [{ key: 'title', label: 'Title', type: 'text' }],
        pipelines: [
          { name: 'A', stages: ['One', 'Two'] },
          { name: 'B', stages: ['X'] },
        ],
      });
      const replaced = await put('deal', {
        name: 'Deal',
        fields: [{ key: 'title', label: 'Title', type: 'text' }],
        pipelines: [{ name: 'A', stages: ['Two', 'Three'] }],
        archived: true,
      });
      expect(replaced.json().pipelines).toEqual([{ name: 'A', stages: ['Two', 'Three'] }]);
      expect((await get('/api/entities')).json().map((e: { label: string }) => e.label)).not.toContain(
        'Deal',
      );
      expect(
        (await get('/api/v1/settings/entities')).json().entities.map((e: { key: string }) => e.key),
      ).toContain('deal');
    });

    it('adds users for assignees and viewers', async () => {
      const created = await t.request({
        method: 'POST',
        url: '/api/v1/settings/users',
        key: account.apiKey,
        body: { email: 'sales@acme.test', name: 'Sales' },
      });
      expect(created.statusCode).toBe(201);
      const duplicate = await t.request({
        method: 'POST',
        url: '/api/v1/settings/users',
        key: account.apiKey,
        body: { email: 'SALES@acme.test', name: 'Other' },
      });
      expect(duplicate.statusCode).toBe(409);
      const list = (await get('/api/v1/settings/users')).json();
      expect(list.users.map((u: { email: string }) => u.email)).toContain('sales@acme.test');
    });
  });

  describe('errors', () => {
    const field = (extra: object) => ({
      name: 'Bad',
      fields: [{ key: 'f', label: 'F', type: 'text', ...extra }],
    });
    it.each([
      ['an unknown type', field({ type: 'color' })],
      ['a format of another type', field({ format: 'integer' })],
      ['a select without options', field({ type: 'select' })],
      [
        'duplicate field keys',
        {
          name: 'Bad',
          fields: [
            { key: 'a', label: 'A', type: 'text' },
            { key: 'a', label: 'B', type: 'text' },
          ],
        },
      ],
      [
        'a role given twice',
        {
          name: 'Bad',
          fields: [
            { key: 'a', label: 'A', type: 'text', role: 'email' },
            { key: 'b', label: 'B', type: 'text', role: 'email' },
          ],
        },
      ],
      [
        'a duplicate rule naming an unknown field',
        { ...field({}), duplicate_rule: { match: ['nope'], action: 'update' } },
      ],
      ['an unknown duplicate action', { ...field({}), duplicate_rule: { match: ['f'], action: 'merge' } }],
      ['a field key with spaces', field({ key: 'first name' })],
    ])('refuses %s with 422 and details', async (_label, body) => {
      const response = await put('bad', body);
      expect(response.statusCode).toBe(422);
      expect(response.json().error).toBe('validation_failed');
      expect(response.json().details.length).toBeGreaterThan(0);
    });

    const blankNamed = (key: string) => ({
      error: 'validation_failed',
      details: [{ key, reason: 'required', message: 'must hold a character other than blanks' }],
    });
    const emailField = [{ key: 'email', label: 'Email', type: 'text' }];
    it.each([
      ['an entity name of spaces', { name: '   ', fields: emailField }, 'name'],
      ['an entity name of a tab and a line break', { name: '\t\n', fields: emailField }, 'name'],
      [
        'a field label of blanks',
        { name: 'Blank', fields: [{ key: 'email', label: ' ', type: 'text' }] },
        'fields.0.label',
      ],
      [
        'a pipeline name of blanks',
        { name: 'Blank', fields: emailField, pipelines: [{ name: '\r\n', stages: ['New'] }] },
        'pipelines.0.name',
      ],
      [
        'a stage name of blanks',
        { name: 'Blank', fields: emailField, pipelines: [{ name: 'Sales', stages: ['New', '  '] }] },
        'pipelines.0.stages.1',
      ],
      [
        'a select option of blanks',
        {
          name: 'Blank',
          fields: [{ key: 'topic', label: 'Topic', type: 'select', options: ['Sales', ' '] }],
        },
        'fields.0.options.1',
      ],
    ])('refuses %s as required, and stores nothing', async (_label, body, key) => {
      const refused = await put('blank', body);
      expect(refused.statusCode).toBe(422);
      expect(refused.json()).toEqual(blankNamed(key));
      expect((await get('/api/v1/settings/entities/blank')).statusCode).toBe(404);
    });

    it('keeps blanks around the text of names and labels, and refuses a PUT that blanks a stored name', async () => {
      const pipelines = [{ name: ' Sales ', stages: [' New ', 'Won'] }];
      const padded = await put('padded', {
        name: ' Padded ',
        fields: [{ key: 'email', label: ' Email ', type: 'text' }],
        pipelines,
      });
      expect(padded.statusCode).toBe(200);
      expect(padded.json()).toMatchObject({
        name: ' Padded ',
        fields: [{ label: ' Email ' }],
        pipelines: [{ name: ' Sales ', stages: [' New ', 'Won'] }],
      });
      const renamed = await put('padded', { name: ' ', fields: emailField, pipelines });
      expect(renamed.json()).toEqual(blankNamed('name'));
      expect((await get('/api/v1/settings/entities/padded')).json().name).toBe(' Padded ');
    });

    it('refuses a user name of blanks only, on creation and rename', async () => {
      const users = (url = '/api/v1/settings/users') =>
        t.request({ method: 'GET', url, key: account.apiKey });
      const send = (method: 'POST' | 'PATCH', url: string, body: unknown) =>
        t.request({ method, url, key: account.apiKey, body });
      const before = (await users()).json().users.length;
      for (const name of ['  ', '\t', '\n \n']) {
        const refused = await send('POST', '/api/v1/settings/users', { email: 'blank@acme.test', name });
        expect(refused.statusCode, JSON.stringify(name)).toBe(422);
        expect(refused.json().details).toEqual([
          { key: 'name', reason: 'required', message: 'must hold a character other than blanks' },
        ]);
      }
      expect((await users()).json().users).toHaveLength(before);
      const user = (
        await send('POST', '/api/v1/settings/users', { email: 'named@acme.test', name: 'Named' })
      ).json();
      const renamed = await send('PATCH', `/api/v1/settings/users/${user.id}`, { name: ' ' });
      expect(renamed.statusCode).toBe(422);
      expect(renamed.json().details[0]).toMatchObject({ key: 'name', reason: 'required' });
      const listed = (await users()).json().users.find((u: { id: string }) => u.id === user.id);
      expect(listed.name).toBe('Named');
    });

    it('refuses labels that intake cannot tell apart, and keeps a label like another key', async () => {
      const refused = await put('amb', {
        name: 'Ambiguous',
        fields: [
          { key: 'p', label: 'Same', type: 'text' },
          { key: 'q', label: 'Same', type: 'text' },
          { key: 'r', label: 's-A m_E', type: 'text' },
          { key: 's', label: 'Other', type: 'text' },
        ],
      });
      expect(refused.statusCode).toBe(422);
      expect(refused.json()).toEqual({
        error: 'validation_failed',
        details: [
          { key: 'fields.1.label', reason: 'duplicate', message: expect.stringContaining('field p') },
          { key: 'fields.2.label', reason: 'duplicate', message: expect.stringContaining('field p') },
        ],
      });
      expect((await get('/api/v1/settings/entities/amb')).statusCode).toBe(404);

      // A label that normalises like another field's key stays allowed: the key wins at intake.
      const allowed = await put('amb', {
        name: 'Ambiguous',
        fields: [
          { key: 'same', label: 'Plain', type: 'text' },
          { key: 'q', label: 'Same', type: 'text' },
        ],
      });
      expect(allowed.statusCode).toBe(200);
      const created = await post('/api/v1/records', { entity: 'amb', fields: { SAME: 'hello' } });
      expect(created.statusCode).toBe(201);
      const read = await get(`/api/v1/records/${created.json().id}`);
      expect(read.json().fields).toEqual({ same: 'hello' });
    });

    it('refuses select options that intake cannot tell apart, since the second could never be chosen', async () => {
      const refused = await put('opts', {
        name: 'Options',
        fields: [
          { key: 'topic', label: 'Topic', type: 'multiselect', options: ['Sales', 'Support', ' sales '] },
        ],
      });
      expect(refused.statusCode).toBe(422);
      expect(refused.json()).toEqual({
        error: 'validation_failed',
        details: [{ key: 'fields.0.options', reason: 'duplicate', message: expect.stringContaining('case') }],
      });
      expect((await get('/api/v1/settings/entities/opts')).statusCode).toBe(404);

      // Options that differ once case and blanks are ignored stay, each chosen by its own value.
      const allowed = await put('opts', {
        name: 'Options',
        fields: [
          { key: 'topic', label: 'Topic', type: 'multiselect', options: ['Sales', 'Support', 'Sales EU'] },
        ],
      });
      expect(allowed.statusCode).toBe(200);
      const created = await post('/api/v1/records', {
        entity: 'opts',
        fields: { topic: [' sales ', 'SALES eu'] },
      });
      expect(created.statusCode).toBe(201);
      expect((await get(`/api/v1/records/${created.json().id}`)).json().fields).toEqual({
        topic: ['Sales', 'Sales EU'],
      });
    });

    it('refuses keys that intake cannot tell apart once normalised', async () => {
      const refused = await put('keys_alike', {
        name: 'Keys alike',
        fields: [
          { key: 'first_name', label: 'First', type: 'text' },
          { key: 'firstname', label: 'Given', type: 'text' },
        ],
      });
      expect(refused.statusCode).toBe(422);
      expect(refused.json()).toEqual({
        error: 'validation_failed',
        details: [
          { key: 'fields.1.key', reason: 'duplicate', message: expect.stringContaining('first_name') },
        ],
      });
    });

    it('keeps an entity stored with labels alike readable and refuses its next PUT until they differ', async () => {
      const definition = (secondLabel: string) => ({
        name: 'Older',
        fields: [
          { key: 'p', label: 'Same', type: 'text' },
          { key: 'q', label: secondLabel, type: 'text' },
        ],
      });
      expect((await put('older', definition('Different'))).statusCode).toBe(200);
      // As stored before labels had to differ.
      const stored = definition('same').fields.map((f) => ({
        ...f,
        format: null,
        required: false,
        options: null,
        role: null,
      }));
      await t.db
        .updateTable('entities')
        .set({ fields: JSON.stringify(stored) })
        .where('account_id', '=', account.id)
        .where('key', '=', 'older')
        .execute();
      t.services.entities.invalidate(account.id);

      const read = await get('/api/v1/settings/entities/older');
      expect(read.statusCode).toBe(200);
      expect(read.json().fields.map((f: { label: string }) => f.label)).toEqual(['Same', 'same']);
      const created = await post('/api/v1/records', { entity: 'older', fields: { Same: 'hello' } });
      expect(created.statusCode).toBe(201);

      const again = await put('older', definition('same'));
      expect(again.statusCode).toBe(422);
      expect(again.json().details).toEqual([
        { key: 'fields.1.label', reason: 'duplicate', message: expect.any(String) },
      ]);
      expect((await put('older', definition('Other'))).statusCode).toBe(200);
    });
  });

  describe('security', () => {
    it("never shows another account's entities and keys without `settings` cannot change them", async () => {
      const other = await t.createAccount();
      await put('secret_entity', { name: 'Secret', fields: [] }, other.apiKey);
      expect((await get('/api/v1/entities')).body).not.toContain('secret_entity');
      expect((await get('/api/v1/settings/entities')).body).not.toContain('secret_entity');
      const reader = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/api-keys',
          key: account.apiKey,
          body: { name: 'r', permissions: ['records:read'] },
        })
      ).json();
      expect((await put('lead', LEAD_ENTITY, reader.key)).statusCode).toBe(403);
      const s1 = await t.request({ method: 'GET', url: '/api/entities' });
      expect(s1.statusCode).toBe(401);
      expect(s1.json().status).toBe('error');
    });
  });
});
