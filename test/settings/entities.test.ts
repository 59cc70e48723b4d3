import { randomUUID } from 'node:crypto';
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

  /** Fields a distribution rule filters on (postal_code, budget) beside an email. */
  const RULED_FIELDS = [
    { key: 'email', label: 'Email', type: 'text' },
    { key: 'postal_code', label: 'Postal code', type: 'text', format: 'postal_code' },
    { key: 'budget', label: 'Budget', type: 'number' },
  ];
  /** An account with the distribution module whose lead has a rule filtering on postal_code and budget. */
  async function accountWithRule() {
    const owner = await t.createAccount({ modules: ['distribution'] });
    const as = (method: 'POST' | 'PUT', url: string, body: unknown) =>
      t.request({ method, url, key: owner.apiKey, body });
    expect((await put('lead', { name: 'Lead', fields: RULED_FIELDS }, owner.apiKey)).statusCode).toBe(200);
    const partner = (await as('POST', '/api/v1/distribution/partners', { name: 'Partner' })).json();
    expect((await as('PUT', '/api/v1/settings/distributions/lead', {})).statusCode).toBe(200);
    const participation = (
      await as('POST', '/api/v1/settings/distributions/lead/participations', {
        partner_id: partner.id,
        channel: 'webhook',
        address: 'https://partner.example.com/leads',
        price_cents: 100,
      })
    ).json();
    const rules = await as('PUT', '/api/v1/settings/distributions/lead/rules', [
      {
        name: 'Berlin',
        filter: [
          { field: 'postal_code', op: 'postal_prefix', prefix: '10' },
          { field: 'budget', op: 'range', min: 100 },
        ],
        strategy: 'all',
        participation_ids: [participation.id],
      },
    ]);
    expect(rules.statusCode).toBe(200);
    return { owner, ruleId: rules.json()[0].id as string, as };
  }

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

    const bare = (archived = false) => ({ name: 'E', fields: [], archived });
    /** Entities written straight to the database: only their count matters here. */
    const store = (owner: TestAccount, keys: string[], archived: boolean) =>
      t.db
        .insertInto('entities')
        .values(
          keys.map((key) => ({
            account_id: owner.id,
            id: randomUUID(),
            key,
            name: 'E',
            fields: '[]',
            archived,
          })),
        )
        .execute();
    const range = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, index) => `e${from + index}`);

    it('refuses an entity beyond 50 not archived or 100 in all; entities already counted change freely', async () => {
      const owner = await t.createAccount();
      const putAs = (key: string, body: unknown) => put(key, body, owner.apiKey);
      await store(owner, range(0, 49), false);
      expect((await putAs('e49', bare())).statusCode).toBe(200);
      const over = await putAs('e50', bare());
      expect(over.statusCode).toBe(422);
      expect(over.json()).toEqual({
        error: 'validation_failed',
        details: [{ key: 'name', reason: 'too_many', message: expect.stringContaining('at most 50') }],
      });
      expect((await get('/api/v1/settings/entities/e50', owner.apiKey)).statusCode).toBe(404);

      // An archived entity is not counted among the 50; bringing it back is.
      expect((await putAs('e50', bare(true))).statusCode).toBe(200);
      const back = await putAs('e50', bare(false));
      expect(back.statusCode).toBe(422);
      expect(back.json().details).toEqual([
        { key: 'archived', reason: 'too_many', message: expect.stringContaining('at most 50') },
      ]);
      expect((await putAs('e0', { name: 'Renamed', fields: [] })).statusCode).toBe(200);
      expect((await putAs('e0', bare(true))).statusCode).toBe(200);
      expect((await putAs('e50', bare(false))).statusCode).toBe(200);

      // Archived ones count among the 100; an archived entity's key may be defined anew.
      await store(owner, range(51, 99), true);
      expect((await putAs('e99', bare(true))).statusCode).toBe(200);
      const full = await putAs('e100', bare(true));
      expect(full.statusCode).toBe(422);
      expect(full.json().details).toEqual([
        { key: 'name', reason: 'too_many', message: expect.stringContaining('at most 100') },
      ]);
      expect((await putAs('e51', { name: 'Again', fields: [], archived: true })).statusCode).toBe(200);
      const listed = (await get('/api/v1/settings/entities', owner.apiKey)).json().entities;
      expect(listed).toHaveLength(100);
      expect(listed.filter((e: { archived: boolean }) => !e.archived)).toHaveLength(50);
    });

    it('refuses a PUT that leaves out a field a distribution rule filters on, naming the rule', async () => {
      const { owner, ruleId } = await accountWithRule();
      const refused = await put('lead', { name: 'Lead', fields: [RULED_FIELDS[0]] }, owner.apiKey);
      expect(refused.statusCode).toBe(422);
      expect(refused.json()).toEqual({
        error: 'validation_failed',
        details: [
          {
            key: `distribution_rules.${ruleId}.filter.0.field`,
            reason: 'used_by_rule',
            message:
              'distribution rule "Berlin" filters on field postal_code, which the definition leaves out',
          },
          {
            key: `distribution_rules.${ruleId}.filter.1.field`,
            reason: 'used_by_rule',
            message: 'distribution rule "Berlin" filters on field budget, which the definition leaves out',
          },
        ],
      });
      const kept = (await get('/api/v1/settings/entities/lead', owner.apiKey)).json();
      expect(kept.fields.map((f: { key: string }) => f.key)).toEqual(['email', 'postal_code', 'budget']);

      // A changed type passes, as the rules take any op on any field; other changes pass too.
      const retyped = RULED_FIELDS.map((f) => (f.key === 'budget' ? { ...f, type: 'text' } : f));
      const extended = [...retyped, { key: 'city', label: 'City', type: 'text' }];
      expect((await put('lead', { name: 'Lead', fields: extended }, owner.apiKey)).statusCode).toBe(200);

      // What the rule lacked before is not the change's: a field gone already does not block.
      await t.db
        .updateTable('distribution_rules')
        .set({ filter: JSON.stringify([{ field: 'gone', op: 'equals', value: 'x' }]) })
        .where('account_id', '=', owner.id)
        .where('id', '=', ruleId)
        .execute();
      expect((await put('lead', { name: 'Lead', fields: [RULED_FIELDS[0]] }, owner.apiKey)).statusCode).toBe(
        200,
      );
      // With the rule changed first, the field goes.
      const again = await accountWithRule();
      await again.as('PUT', '/api/v1/settings/distributions/lead/rules', []);
      expect(
        (await put('lead', { name: 'Lead', fields: [RULED_FIELDS[0]] }, again.owner.apiKey)).statusCode,
      ).toBe(200);
    });

    it('refuses field keys that intake takes at the top level for itself', async () => {
      const refused = await put('reserved', {
        name: 'Reserved',
        fields: [
          { key: 'note', label: 'Note', type: 'text' },
          { key: 'email', label: 'Email', type: 'text' },
          { key: 'assignee', label: 'Assignee', type: 'text' },
          { key: 'meta', label: 'Meta', type: 'text' },
          { key: 'lead_object', label: 'Lead object', type: 'text' },
        ],
      });
      expect(refused.statusCode).toBe(422);
      expect(refused.json()).toEqual({
        error: 'validation_failed',
        details: ['0', '2', '3', '4'].map((index) => ({
          key: `fields.${index}.key`,
          reason: 'not_allowed',
          message: expect.stringContaining('at the top level'),
        })),
      });
      expect((await get('/api/v1/settings/entities/reserved')).statusCode).toBe(404);
    });

    it('keeps an entity stored with a reserved field key working and refuses its next PUT until renamed', async () => {
      const definition = (key: string) => ({
        name: 'Older reserved',
        fields: [{ key, label: 'Remark', type: 'text' }],
      });
      expect((await put('older_reserved', definition('remark'))).statusCode).toBe(200);
      // As stored before the rule.
      await t.db
        .updateTable('entities')
        .set({
          fields: JSON.stringify([
            {
              key: 'note',
              label: 'Remark',
              type: 'text',
              format: null,
              required: false,
              options: null,
              role: null,
            },
          ]),
        })
        .where('account_id', '=', account.id)
        .where('key', '=', 'older_reserved')
        .execute();
      t.services.entities.invalidate(account.id);

      expect((await get('/api/v1/settings/entities/older_reserved')).statusCode).toBe(200);
      const created = await post('/api/v1/records', { entity: 'older_reserved', fields: { note: 'hello' } });
      expect(created.statusCode).toBe(201);
      expect((await get(`/api/v1/records/${created.json().id}`)).json().fields).toEqual({ note: 'hello' });

      const again = await put('older_reserved', definition('note'));
      expect(again.statusCode).toBe(422);
      expect(again.json().details).toEqual([
        { key: 'fields.0.key', reason: 'not_allowed', message: expect.any(String) },
      ]);
      expect((await put('older_reserved', definition('remark'))).statusCode).toBe(200);
    });

    it('refuses a duplicate rule naming a field twice, through the API and the service', async () => {
      const body = {
        name: 'Twice',
        fields: [{ key: 'email', label: 'Email', type: 'text' }],
        duplicate_rule: { match: ['email', 'email'], action: 'update' },
      };
      const refused = await put('twice', body);
      expect(refused.statusCode).toBe(422);
      expect(refused.json()).toEqual({
        error: 'validation_failed',
        details: [{ key: 'duplicate_rule.match', reason: 'duplicate', message: expect.any(String) }],
      });
      await expect(t.services.entities.put(account.id, 'twice', body)).rejects.toMatchObject({
        code: 'validation_failed',
        details: [{ key: 'duplicate_rule.match', reason: 'duplicate', message: 'each field key once' }],
      });
      expect((await get('/api/v1/settings/entities/twice')).statusCode).toBe(404);
    });

    it('answers 404 for an entity key in the path not of the form of one', async () => {
      for (const key of ['NOPE', '9lead', 'le%20ad', 'a%00b', 'x'.repeat(101)]) {
        for (const response of [
          await get(`/api/v1/settings/entities/${key}`),
          await put(key, { name: 'Malformed', fields: [] }),
        ]) {
          expect(response.statusCode, key).toBe(404);
          expect(response.json(), key).toEqual({ error: 'not_found' });
        }
      }
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

    it("counts and guards an account's own entities only", async () => {
      // Another account's rule on the same field keys blocks nothing here.
      await accountWithRule();
      const owner = await t.createAccount({ modules: ['distribution'] });
      expect((await put('lead', { name: 'Lead', fields: RULED_FIELDS }, owner.apiKey)).statusCode).toBe(200);
      expect((await put('lead', { name: 'Lead', fields: [RULED_FIELDS[0]] }, owner.apiKey)).statusCode).toBe(
        200,
      );
      // Another account's 50 entities leave this one room.
      const full = await t.createAccount();
      await t.db
        .insertInto('entities')
        .values(
          Array.from({ length: 50 }, (_, index) => ({
            account_id: full.id,
            id: randomUUID(),
            key: `e${index}`,
            name: 'E',
            fields: '[]',
          })),
        )
        .execute();
      expect((await put('e50', { name: 'E', fields: [] }, full.apiKey)).statusCode).toBe(422);
      expect((await put('e50', { name: 'E', fields: [] }, owner.apiKey)).statusCode).toBe(200);
    });
  });
});
