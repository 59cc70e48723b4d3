import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, putEntity } from '../helpers/fixtures.ts';
import { type Receiver, startReceiver, waitFor } from '../outbound/receiver.ts';

describe.each(TEST_DATABASES)('CRM stage moves on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let receiver: Receiver;
  let dispatcher: Dispatcher;
  beforeAll(async () => {
    t = await startTestApp(kind);
    dispatcher = createDispatcher(
      t.services.outbound,
      { info() {}, warn() {}, error() {} },
      { idlePollMs: 20 },
    );
    dispatcher.start();
    account = await accountWithLeads(t, { modules: ['crm'] });
    await putEntity(t, account, 'deal', {
      name: 'Deal',
      fields: [{ key: 'email', label: 'Email', type: 'text', role: 'email' }],
      pipelines: [
        { name: 'Sales', stages: ['Open', 'Won'] },
        { name: 'Renewal', stages: ['Due', 'Renewed'] },
      ],
    });
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await dispatcher?.stop(1_000);
    await receiver?.close();
    await t?.close();
  });

  const create = async (entity = 'lead', who = account, extra: object = {}) => {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: who.apiKey,
      body: { entity, fields: { email: `m${Math.random()}@b.co` }, ...extra },
    });
    expect(response.statusCode).toBe(201);
    return response.json().id as string;
  };
  const move = (id: string, body: unknown, key = account.apiKey) =>
    t.request({ method: 'POST', url: `/api/v1/crm/records/${id}/stage`, key, body });
  const history = async (id: string, query = '') => {
    const response = await t.request({
      method: 'GET',
      url: `/api/v1/records/${id}/history${query}`,
      key: account.apiKey,
    });
    expect(response.statusCode).toBe(200);
    return response.json();
  };

  describe('happy path', () => {
    it('moves a record, answers the stage it left, and keeps the stays and the event', async () => {
      const id = await create();
      const placed = (
        await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })
      ).json();
      expect(placed.crm).toEqual({ pipeline: 'Sales', stage: 'New', entered_at: expect.any(String) });
      const response = await move(id, { stage: 'Contacted' });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({
        id,
        crm: { pipeline: 'Sales', stage: 'Contacted', entered_at: expect.any(String) },
        previous: 'New',
      });
      const record = (
        await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })
      ).json();
      expect(record.crm).toEqual(response.json().crm);
      const read = await history(id);
      expect(read.events.map((e: { type: string }) => e.type)).toEqual(['stage_changed', 'lead_created']);
      expect(read.events[0]).toMatchObject({
        message: 'Stage New → Contacted',
        actor: { type: 'api_key', name: 'Initial key' },
        data: { pipeline: 'Sales', stage: 'Contacted', previous: { pipeline: 'Sales', stage: 'New' } },
      });
      expect(read.stages).toEqual([
        {
          pipeline: 'Sales',
          stage: 'Contacted',
          entered_at: record.crm.entered_at,
          left_at: null,
          seconds: expect.any(Number),
        },
        {
          pipeline: 'Sales',
          stage: 'New',
          entered_at: placed.crm.entered_at,
          left_at: record.crm.entered_at,
          seconds: expect.any(Number),
        },
      ]);
      expect(read.next_cursor).toBeNull();
    });

    it('counts the seconds of a stay up to now while it lasts', async () => {
      const id = await create();
      await t.db
        .updateTable('records')
        .set({ stage_entered_at: new Date(Date.now() - 90_000) })
        .where('id', '=', id)
        .execute();
      const seconds = (await history(id)).stages[0].seconds;
      expect(seconds).toBeGreaterThanOrEqual(90);
      expect(seconds).toBeLessThan(100);
    });

    it('treats a move to the current stage as a no-op', async () => {
      const id = await create();
      const response = await move(id, { stage: 'New' });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toMatchObject({ crm: { stage: 'New' }, previous: 'New' });
      expect((await history(id)).events.map((e: { type: string }) => e.type)).toEqual(['lead_created']);
    });

    it('moves across pipelines when the pipeline is named', async () => {
      const id = await create('deal');
      const response = await move(id, { pipeline: 'Renewal', stage: 'Due' });
      expect(response.json()).toMatchObject({ crm: { pipeline: 'Renewal', stage: 'Due' }, previous: 'Open' });
    });

    it('S1 status change is the same move, shown as lead_status_event', async () => {
      const id = await create();
      const response = await t.request({
        method: 'PATCH',
        url: `/api/leads/${id}/status`,
        key: account.apiKey,
        body: { status_step: 'Won' },
      });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({ status: 'success', lead_id: id, new_status: 'Won' });
      const lead = (await t.request({ method: 'GET', url: `/api/leads/${id}`, key: account.apiKey })).json();
      expect(lead.status_step).toBe('Won');
      expect(lead.events[0]).toMatchObject({ type: 'lead_status_event', message: 'Stage New → Won' });
      expect((await history(id)).stages.map((s: { stage: string }) => s.stage)).toEqual(['Won', 'New']);
    });

    it('sends record.stage_changed to subscribed account webhooks, signed', async () => {
      const hook = await t.request({
        method: 'POST',
        url: '/api/v1/settings/webhooks',
        key: account.apiKey,
        body: { url: receiver.url, events: ['record.stage_changed'] },
      });
      expect(hook.statusCode).toBe(201);
      receiver.verifyWith(hook.json().secret);
      const id = await create();
      await move(id, { stage: 'Contacted' });
      const message = await waitFor(() => receiver.received.find((r) => r.json.data.record.id === id));
      expect(message.json).toMatchObject({
        type: 'record.stage_changed',
        data: {
          record: { id, entity: 'lead' },
          crm: { pipeline: 'Sales', stage: 'Contacted', entered_at: expect.any(String) },
          previous: { pipeline: 'Sales', stage: 'New' },
        },
      });
      expect(receiver.invalid).toEqual([]);
      await t.request({
        method: 'DELETE',
        url: `/api/v1/settings/webhooks/${hook.json().id}`,
        key: account.apiKey,
      });
    });

    it('pages the history with a cursor, newest first, the creation last', async () => {
      const id = await create();
      for (const stage of ['Contacted', 'Won', 'New'])
        expect((await move(id, { stage })).statusCode).toBe(200);
      const seen: string[] = [];
      let cursor = '';
      for (let page = 0; page < 10; page++) {
        const read = await history(id, `?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
        seen.push(
          ...read.events.map((e: { type: string; data: { stage?: string } }) => e.data.stage ?? e.type),
        );
        if (!read.next_cursor) break;
        cursor = read.next_cursor;
      }
      expect(seen).toEqual(['New', 'Won', 'Contacted', 'lead_created']);
    });

    it('serialises 20 concurrent moves of one record: true previous stages, stays without overlap', async () => {
      const id = await create();
      const stages = ['New', 'Contacted', 'Won'];
      const targets = Array.from({ length: 20 }, (_, i) => stages[(i * 7 + 1) % 3]!);
      const answers = await Promise.all(targets.map((stage) => move(id, { stage })));
      for (const answer of answers) expect(answer.statusCode).toBe(200);
      const read = await history(id, '?limit=500');
      const stays = [...read.stages].reverse();
      const moves = answers.map((a) => a.json()).filter((a) => a.previous !== a.crm.stage);
      expect(stays).toHaveLength(moves.length + 1);
      expect(read.events.filter((e: { type: string }) => e.type === 'stage_changed')).toHaveLength(
        moves.length,
      );
      for (let i = 1; i < stays.length; i++) {
        expect(stays[i - 1].left_at).toBe(stays[i].entered_at);
        expect(stays[i - 1].stage).not.toBe(stays[i].stage);
      }
      expect(stays[stays.length - 1].left_at).toBeNull();
      // Each move's answer is one step of the chain of stays: from the stay it ended to the one it began.
      const steps = stays
        .slice(1)
        .map(
          (stay: { stage: string; entered_at: string }, i: number) =>
            `${stays[i].stage}>${stay.stage}@${stay.entered_at}`,
        );
      const answered = moves.map((m) => `${m.previous}>${m.crm.stage}@${m.crm.entered_at}`);
      expect(answered.sort()).toEqual(steps.sort());
    });

    it('intake places a new record by the same names (crm node and S1 status:<pipeline>)', async () => {
      const s2 = await create('lead', account, { crm: { stage: 'Won' } });
      expect((await history(s2)).stages[0]).toMatchObject({ stage: 'Won', left_at: null });
      const s1 = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: 'deal', email: 's1@b.co', 'status:Renewal': 'Renewed' },
      });
      expect(s1.statusCode).toBe(200);
      expect((await history(s1.json().lead_id)).stages[0]).toMatchObject({
        pipeline: 'Renewal',
        stage: 'Renewed',
      });
      // A lead is in one stage: a second status key is refused, not dropped.
      const twoStatuses = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: 'deal', email: 's1-two@b.co', 'status:Sales': 'Won', 'status:Renewal': 'Renewed' },
      });
      expect(twoStatuses.statusCode).toBe(422);
      expect(Object.keys(twoStatuses.json().errors)).toEqual(['status:Renewal']);
      // Or by the ids S1's entity listing shows.
      const listed = (await t.request({ method: 'GET', url: '/api/entities', key: account.apiKey })).json();
      const deal = listed.find((entity: { slug: string }) => entity.slug === 'deal');
      const renewal = deal.pipelines.find((pipeline: { name: string }) => pipeline.name === 'Renewal');
      const renewed = renewal.statuses.find((status: { name: string }) => status.name === 'Renewed');
      expect(renewed.id).toMatch(/^[0-9a-f-]{36}$/);
      const byId = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: deal.id, email: 's1-ids@b.co', [`status:${renewal.id}`]: renewed.id.toUpperCase() },
      });
      expect(byId.statusCode, byId.body).toBe(200);
      expect((await history(byId.json().lead_id)).stages[0]).toMatchObject({
        pipeline: 'Renewal',
        stage: 'Renewed',
      });
    });

    // An entity whose duplicate rule updates the stored record (PUT is idempotent: each test puts it).
    const contactEntity = () =>
      putEntity(t, account, 'contact', {
        name: 'Contact',
        fields: [{ key: 'email', label: 'Email', type: 'text', role: 'email' }],
        duplicate_rule: { match: ['email'], action: 'update' },
        pipelines: [{ name: 'Sales', stages: ['Open', 'Won'] }],
      });
    const intakeLog = async (query: string) => {
      const response = await t.request({
        method: 'GET',
        url: `/api/v1/intake-log?${query}`,
        key: account.apiKey,
      });
      expect(response.statusCode).toBe(200);
      return response.json().entries as { warnings: unknown[]; items: { warnings?: unknown[] }[] | null }[];
    };

    it('a repeated handover does not move the stored record, and its crm node is a warning naming the move', async () => {
      await contactEntity();
      const intake = (body: object) =>
        t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: { entity: 'contact', ...body },
        });
      const first = await intake({ fields: { email: 'kept@b.co' } });
      expect(first.statusCode).toBe(201);
      const id = first.json().id as string;
      const kept = {
        key: 'crm',
        reason: 'existing_record',
        message: expect.stringContaining(`POST /api/v1/crm/records/${id}/stage`),
      };
      const update = await intake({ fields: { email: 'kept@b.co' }, crm: { stage: 'Won' } });
      expect(update.statusCode).toBe(200);
      expect(update.json()).toMatchObject({ id, created: false, updated: true, warnings: [kept] });
      expect(update.json().warnings[0].message).toContain('stays in Sales / Open');
      // Naming the stage the record is in leaves nothing undone: no warning.
      const same = await intake({ fields: { email: 'kept@b.co' }, crm: { stage: 'Open' } });
      expect(same.json()).toMatchObject({ id, updated: true, warnings: [] });
      // The log entries carry the warnings as the answers did (newest first).
      expect((await intakeLog(`record_id=${id}&outcome=updated`)).map((entry) => entry.warnings)).toEqual([
        [],
        [kept],
      ]);

      // S2 bulk: the entry that updates is warned; the new one enters the stage it names.
      const bulk = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: {
          records: [
            { entity: 'contact', fields: { email: 'kept@b.co' }, crm: { stage: 'Won' } },
            { entity: 'contact', fields: { email: 'fresh@b.co' }, crm: { stage: 'Won' } },
          ],
        },
      });
      expect(bulk.json().results).toEqual([
        expect.objectContaining({ id, updated: true, warnings: [kept] }),
        expect.objectContaining({ created: true, warnings: [] }),
      ]);
      const fresh = bulk.json().results[1].id as string;
      expect((await history(fresh)).stages[0]).toMatchObject({ stage: 'Won' });
      const [bulkEntry] = await intakeLog(`record_id=${id}&endpoint=records.bulk`);
      expect(bulkEntry!.items).toEqual([
        expect.objectContaining({ index: 0, status: 'updated', warnings: [kept] }),
        expect.not.objectContaining({ warnings: expect.anything() }),
      ]);

      // S1: the same warning in S1's answer, naming the key as sent and S1's status change.
      const s1Kept = {
        key: 'crm',
        reason: 'existing_record',
        message: expect.stringContaining(
          `status:Sales places only new leads; change its status with PATCH /api/leads/${id}/status`,
        ),
      };
      const s1 = (body: object) =>
        t.request({
          method: 'POST',
          url: '/api/intake',
          key: account.apiKey,
          body: { entity: 'contact', ...body },
        });
      const s1Update = await s1({ email: 'kept@b.co', 'status:Sales': 'Won' });
      expect(s1Update.json()).toEqual({
        status: 'success',
        lead_id: id,
        created_at: expect.any(String),
        warnings: [s1Kept],
      });
      // No warning, no `warnings` (S1 answers carry only these and the booking's).
      expect((await s1({ email: 'kept@b.co', 'status:Sales': 'Open' })).json()).toEqual({
        status: 'success',
        lead_id: id,
        created_at: expect.any(String),
      });
      const s1Bulk = await t.request({
        method: 'POST',
        url: '/api/leads/bulk',
        key: account.apiKey,
        body: {
          entity: 'contact',
          batch: [
            { email: 'kept@b.co', 'status:Sales': 'Won' },
            { email: 'fresh@b.co', 'status:Sales': 'Won' },
          ],
        },
      });
      expect(s1Bulk.json()).toEqual({
        status: 'success',
        created: [
          { lead_id: id, email: 'kept@b.co', warnings: [s1Kept] },
          { lead_id: fresh, email: 'fresh@b.co' },
        ],
      });
      const [s1BulkEntry] = await intakeLog(`record_id=${id}&endpoint=s1.bulk`);
      expect(s1BulkEntry!.items).toEqual([
        expect.objectContaining({ index: 0, status: 'updated', warnings: [s1Kept] }),
        expect.not.objectContaining({ warnings: expect.anything() }),
      ]);
      // An unknown stage is still refused on a repeat, as on a new record (S1 shape on S1).
      const unknown = await s1({ email: 'kept@b.co', 'status:Sales': 'Nowhere' });
      expect(unknown.statusCode).toBe(422);
      expect(unknown.json()).toMatchObject({
        status: 'error',
        errors: { 'status:Sales.stage': [expect.any(String)] },
      });

      // Through all of it the record stayed where it was.
      expect((await history(id)).stages).toEqual([expect.objectContaining({ stage: 'Open', left_at: null })]);
    });

    it('an external id match or an ignored duplicate is not moved either; an unknown stage is still 422', async () => {
      const id = await create('lead', account, { meta: { external_id: 'kept-7' } });
      const kept = {
        key: 'crm',
        reason: 'existing_record',
        message: expect.stringContaining(`POST /api/v1/crm/records/${id}/stage`),
      };
      const repeat = (crm: object) =>
        t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: { entity: 'lead', fields: { first_name: 'Ann' }, meta: { external_id: 'kept-7' }, crm },
        });
      const update = await repeat({ stage: 'Won' });
      expect(update.statusCode).toBe(200);
      expect(update.json()).toMatchObject({ id, updated: true, warnings: [kept] });
      const unknown = await repeat({ stage: 'Nowhere' });
      expect(unknown.statusCode).toBe(422);
      expect(unknown.json()).toMatchObject({
        error: 'validation_failed',
        details: [{ key: 'crm.stage', reason: 'not_allowed' }],
      });
      expect((await history(id)).stages).toEqual([expect.objectContaining({ stage: 'New', left_at: null })]);

      await putEntity(t, account, 'prospect', {
        name: 'Prospect',
        fields: [{ key: 'email', label: 'Email', type: 'text', role: 'email' }],
        duplicate_rule: { match: ['email'], action: 'ignore' },
        pipelines: [{ name: 'Sales', stages: ['Open', 'Won'] }],
      });
      const prospect = (crm?: object) =>
        t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: { entity: 'prospect', fields: { email: 'once@b.co' }, ...(crm ? { crm } : {}) },
        });
      const stored = (await prospect()).json().id as string;
      const ignored = await prospect({ stage: 'Won' });
      expect(ignored.json()).toMatchObject({
        id: stored,
        created: false,
        updated: false,
        warnings: [
          { key: 'record', reason: 'duplicate' },
          {
            key: 'crm',
            reason: 'existing_record',
            message: expect.stringContaining(`POST /api/v1/crm/records/${stored}/stage`),
          },
        ],
      });
      expect((await prospect({ stage: 'Open' })).json().warnings).toEqual([
        expect.objectContaining({ key: 'record', reason: 'duplicate' }),
      ]);
      expect((await history(stored)).stages).toEqual([
        expect.objectContaining({ stage: 'Open', left_at: null }),
      ]);
    });
  });

  describe('errors', () => {
    it('refuses an unknown stage or pipeline with 422 naming it', async () => {
      const id = await create('deal');
      const stage = await move(id, { pipeline: 'Sales', stage: 'Nowhere' });
      expect(stage.statusCode).toBe(422);
      expect(stage.json()).toMatchObject({
        error: 'validation_failed',
        details: [{ key: 'stage', reason: 'not_allowed' }],
      });
      const pipeline = await move(id, { pipeline: 'Nope', stage: 'Open' });
      expect(pipeline.json()).toMatchObject({ error: 'validation_failed', details: [{ key: 'pipeline' }] });
    });

    it('requires the pipeline when the entity has several', async () => {
      const id = await create('deal');
      const response = await move(id, { stage: 'Won' });
      expect(response.statusCode).toBe(422);
      expect(response.json().details).toEqual([
        expect.objectContaining({ key: 'pipeline', reason: 'pipeline_required' }),
      ]);
      const intake = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'deal', fields: { email: 'x@b.co' }, crm: { stage: 'Won' } },
      });
      expect(intake.json().details).toEqual([
        expect.objectContaining({ key: 'crm.pipeline', reason: 'pipeline_required' }),
      ]);
    });

    it('S1 names no pipeline: the stage name finds it, the record’s own first, else the only one', async () => {
      await putEntity(t, account, 'case', {
        name: 'Case',
        fields: [{ key: 'email', label: 'Email', type: 'text', role: 'email' }],
        pipelines: [
          { name: 'Sales', stages: ['Open', 'Closed'] },
          { name: 'Support', stages: ['Triage', 'Closed'] },
          { name: 'Partners', stages: ['Open', 'Signed'] },
        ],
      });
      const id = await create('case');
      const status = (status_step: string) =>
        t.request({
          method: 'PATCH',
          url: `/api/leads/${id}/status`,
          key: account.apiKey,
          body: { status_step },
        });
      const placed = async () =>
        (await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })).json().crm;
      // In Sales/Open: Closed is in Sales and Support, and Sales is the record's own.
      expect((await status('Closed')).json()).toMatchObject({ status: 'success', new_status: 'Closed' });
      expect(await placed()).toMatchObject({ pipeline: 'Sales', stage: 'Closed' });
      expect((await status('Triage')).statusCode).toBe(200);
      expect(await placed()).toMatchObject({ pipeline: 'Support', stage: 'Triage' });
      expect((await status('Closed')).statusCode).toBe(200);
      expect(await placed()).toMatchObject({ pipeline: 'Support', stage: 'Closed' });
      // Open is in Sales and in Partners, neither the record's own: which one is not guessed.
      const ambiguous = await status('Open');
      expect(ambiguous.statusCode).toBe(422);
      expect(ambiguous.json().errors).toEqual({ pipeline: [expect.any(String)] });
      expect((await status('Nowhere')).json().errors).toEqual({ status_step: [expect.any(String)] });
      // S2 keeps the interface's rule: with several pipelines, the move names one.
      expect((await move(id, { stage: 'Triage' })).json().details).toEqual([
        expect.objectContaining({ key: 'pipeline', reason: 'pipeline_required' }),
      ]);
    });

    it('refuses a missing stage, and answers 404 for an unknown record', async () => {
      const id = await create();
      expect((await move(id, {})).statusCode).toBe(422);
      const unknown = await move('00000000-0000-4000-8000-000000000000', { stage: 'Won' });
      expect(unknown.statusCode).toBe(404);
      const s1 = await t.request({
        method: 'PATCH',
        url: `/api/leads/${id}/status`,
        key: account.apiKey,
        body: { status_step: 'Lost' },
      });
      expect(s1.statusCode).toBe(422);
      expect(s1.json()).toMatchObject({ status: 'error', errors: { status_step: [expect.any(String)] } });
    });

    it('answers 403 module_not_enabled without the CRM module (S1 shape on S1)', async () => {
      const plain = await accountWithLeads(t);
      const id = await create('lead', plain);
      const s2 = await move(id, { stage: 'Won' }, plain.apiKey);
      expect(s2.statusCode).toBe(403);
      expect(s2.json()).toMatchObject({ error: 'module_not_enabled' });
      const s1 = await t.request({
        method: 'PATCH',
        url: `/api/leads/${id}/status`,
        key: plain.apiKey,
        body: { status_step: 'Won' },
      });
      expect(s1.statusCode).toBe(403);
      expect(s1.json()).toMatchObject({ status: 'error', message: expect.any(String) });
    });
  });

  describe('security', () => {
    it("answers 404 for another account's record, on the move and the history", async () => {
      const other = await accountWithLeads(t, { modules: ['crm'] });
      const id = await create('lead', other);
      expect((await move(id, { stage: 'Won' })).statusCode).toBe(404);
      const read = await t.request({
        method: 'GET',
        url: `/api/v1/records/${id}/history`,
        key: account.apiKey,
      });
      expect(read.statusCode).toBe(404);
      const lead = (
        await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: other.apiKey })
      ).json();
      expect(lead.crm.stage).toBe('New');
    });

    it('refuses record tokens and source tokens on the move (401), and keys without the crm permission (403)', async () => {
      const id = await create();
      const token = await t.request({
        method: 'POST',
        url: `/api/v1/records/${id}/tokens`,
        key: account.apiKey,
        body: { fields: ['email'] },
      });
      expect((await move(id, { stage: 'Won' }, token.json().token)).statusCode).toBe(401);
      const source = await t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: account.apiKey,
        body: { name: `Form ${Math.random()}` },
      });
      expect((await move(id, { stage: 'Won' }, source.json().token)).statusCode).toBe(401);
      const reader = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'Reader', permissions: ['records:read'] },
      });
      const readerKey = reader.json().key;
      expect((await move(id, { stage: 'Won' }, readerKey)).statusCode).toBe(403);
      expect((await history(id)).stages).toHaveLength(1);
      const readerHistory = await t.request({
        method: 'GET',
        url: `/api/v1/records/${id}/history`,
        key: readerKey,
      });
      expect(readerHistory.statusCode).toBe(200);
    });

    it('refuses a cursor it did not issue', async () => {
      const id = await create();
      const response = await t.request({
        method: 'GET',
        url: `/api/v1/records/${id}/history?cursor=bm9wZQ`,
        key: account.apiKey,
      });
      expect(response.statusCode).toBe(422);
    });
  });
});
