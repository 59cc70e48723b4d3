import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AutomationRunPayload } from '../../src/modules/crm/automations.service.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, LEAD_ENTITY, putEntity } from '../helpers/fixtures.ts';

/**
 * Automation runs (decisions §7; docs/decisions.md, CRM module), with the queue not worked: the
 * test runs each queued job itself, when it wants, so that what happened between a move and its
 * run is known.
 */

interface HistoryEvent {
  type: string;
  message: string;
  data: Record<string, any>;
  actor: { type: string; name: string };
}

describe.each(TEST_DATABASES)('CRM automation runs on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind, { queue: { work: false } });
  });
  afterAll(async () => {
    await t?.close();
  });

  const crmAccount = () => accountWithLeads(t, { modules: ['crm'] });
  const configure = async (
    account: TestAccount,
    name: string,
    stage: string,
    action: object,
    pipeline?: string,
  ) => {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/settings/automations',
      key: account.apiKey,
      body: { name, entity: 'lead', stage, action, ...(pipeline ? { pipeline } : {}) },
    });
    expect(response.statusCode, response.body).toBe(201);
    return response.json().id as string;
  };
  const create = async (account: TestAccount, fields: Record<string, unknown>) => {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields },
    });
    expect(response.statusCode, response.body).toBe(201);
    return response.json().id as string;
  };
  const move = async (account: TestAccount, id: string, stage: string, pipeline?: string) => {
    const response = await t.request({
      method: 'POST',
      url: `/api/v1/crm/records/${id}/stage`,
      key: account.apiKey,
      body: { stage, ...(pipeline ? { pipeline } : {}) },
    });
    expect(response.statusCode, response.body).toBe(200);
    return response.json();
  };
  const events = async (account: TestAccount, id: string): Promise<HistoryEvent[]> =>
    (
      await t.request({ method: 'GET', url: `/api/v1/records/${id}/history?limit=500`, key: account.apiKey })
    ).json().events;
  const stageOf = async (account: TestAccount, id: string) =>
    (await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })).json().crm;
  const results = async (account: TestAccount, id: string) =>
    (await events(account, id)).filter((e) => e.type.startsWith('automation_')).reverse();

  const sorted = (answers: unknown[]) => answers.map((a) => JSON.stringify(a)).sort();
  /** The record's queued automation jobs that no test run took yet, oldest first. */
  const ran = new Set<string>();
  const queued = async (recordId: string) => {
    const { rows } = await sql<{ id: string; data: AutomationRunPayload }>`
      SELECT id, data FROM pgboss.job
      WHERE name = 'crm.run-automation' AND data->>'recordId' = ${recordId}
      ORDER BY created_on, id`.execute(t.db);
    return rows.filter((row) => !ran.has(row.id));
  };
  const runJob = (job: { id: string; data: AutomationRunPayload }) => {
    ran.add(job.id);
    return t.services.automations.run(job.id, job.data);
  };
  /** Runs the record's queued jobs, each round's at once, until a round queues none. */
  const drain = async (recordId: string) => {
    const answers: Record<string, unknown>[] = [];
    for (let round = 0; round < 100; round++) {
      const jobs = await queued(recordId);
      if (jobs.length === 0) return answers;
      answers.push(...(await Promise.all(jobs.map(runJob))));
    }
    throw new Error('the automations never stopped');
  };

  describe('a move_stage run applies only to the stay that queued it', () => {
    it("does not undo a person's later move: it fails with left_stage and moves nothing", async () => {
      const account = await crmAccount();
      await configure(account, 'Back to new', 'Won', { type: 'move_stage', stage: 'New' });
      const id = await create(account, { email: 'stale@b.co' });
      const won = await move(account, id, 'Won');
      // The person moves on before the automation's job runs.
      await move(account, id, 'Contacted');
      const [job] = await queued(id);
      expect(job!.data).toMatchObject({ stage: 'Won', enteredAt: won.crm.entered_at });
      expect(await runJob(job!)).toEqual({ failed: 'left_stage' });
      expect((await stageOf(account, id)).stage).toBe('Contacted');
      const [failed] = await results(account, id);
      expect(failed).toMatchObject({
        type: 'automation_failed',
        actor: { type: 'automation', name: 'Back to new' },
        data: {
          reason: 'left_stage',
          stage: 'Won',
          entered_at: won.crm.entered_at,
          current_stage: 'Contacted',
        },
      });
      expect((await events(account, id)).filter((e) => e.type === 'stage_changed')).toHaveLength(2);
      expect(await queued(id)).toEqual([]);
    });

    it('moves a record still in its stay, and a move into its own stage moves and triggers nothing', async () => {
      const account = await crmAccount();
      await configure(account, 'Stay won', 'Won', { type: 'move_stage', stage: 'Won' });
      await configure(account, 'Won note', 'Won', { type: 'note', body: 'Won {{email}}' });
      const id = await create(account, { email: 'own@b.co' });
      await move(account, id, 'Won');
      await move(account, id, 'Contacted');
      // The first stay's runs: the move is stale; the note reports the entry, which happened.
      expect(sorted(await drain(id))).toEqual(sorted([{ failed: 'left_stage' }, { ran: 'note' }]));
      expect((await stageOf(account, id)).stage).toBe('Contacted');
      // Back in Won: the move names the stage the record is in, so it moves and queues nothing.
      await move(account, id, 'Won');
      expect(sorted(await drain(id))).toEqual(sorted([{ ran: 'move_stage' }, { ran: 'note' }]));
      const all = await events(account, id);
      expect(all.filter((e) => e.type === 'stage_changed')).toHaveLength(3);
      expect(all.filter((e) => e.type === 'note_added')).toHaveLength(2);
      const outcomes = (await results(account, id)).map(
        (e) => `${e.data.automation}: ${e.type} ${e.data.reason ?? e.data.moved ?? ''}`,
      );
      expect(outcomes.sort()).toEqual([
        'Stay won: automation_failed left_stage',
        'Stay won: automation_ran false',
        'Won note: automation_ran ',
        'Won note: automation_ran ',
      ]);
    });
  });

  describe('the loop limit counts the moves one request caused', () => {
    it('fails the 11th automation move of one origin, whatever the depth of the jobs', async () => {
      const account = await crmAccount();
      const forth = await configure(account, 'Forth', 'New', { type: 'move_stage', stage: 'Contacted' });
      const back = await configure(account, 'Back', 'Contacted', { type: 'move_stage', stage: 'New' });
      const id = await create(account, { email: 'origin@b.co' });
      const origin = randomUUID();
      const answers: Record<string, unknown>[] = [];
      // Eleven runs of one chain, each with depth 0 (as runs that fan out from one move would be).
      for (let i = 0; i < 11; i++) {
        const { crm } = await t
          .request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })
          .then((r) => r.json());
        answers.push(
          await t.services.automations.run(randomUUID(), {
            accountId: account.id,
            recordId: id,
            automationId: crm.stage === 'New' ? forth : back,
            stage: crm.stage,
            enteredAt: crm.entered_at,
            chain: 0,
            origin,
          }),
        );
      }
      expect(answers.slice(0, 10)).toEqual(Array(10).fill({ ran: 'move_stage' }));
      expect(answers[10]).toEqual({ failed: 'loop_limit' });
      const all = await events(account, id);
      expect(all.filter((e) => e.type === 'stage_changed')).toHaveLength(10);
      expect(all.find((e) => e.type === 'automation_failed')?.data.reason).toBe('loop_limit');
    });

    it('counts concurrent moves of one origin once each', async () => {
      const account = await crmAccount();
      const win = await configure(account, 'Win', 'Contacted', { type: 'move_stage', stage: 'Won' });
      const ids = await Promise.all(
        Array.from({ length: 12 }, (_, i) => create(account, { email: `c${i}@b.co` })),
      );
      const origin = randomUUID();
      const answers = await Promise.all(
        ids.map((recordId) =>
          t.services.automations.run(randomUUID(), {
            accountId: account.id,
            recordId,
            automationId: win,
            stage: 'New',
            chain: 0,
            origin,
          }),
        ),
      );
      expect(answers.filter((a) => 'ran' in a)).toHaveLength(10);
      expect(answers.filter((a) => 'failed' in a)).toEqual([
        { failed: 'loop_limit' },
        { failed: 'loop_limit' },
      ]);
    });

    it('stops automations that fan out and back after 10 moves in all', async () => {
      const account = await crmAccount();
      for (const name of ['B1', 'B2', 'B3', 'B4']) {
        await configure(account, name, 'Contacted', { type: 'move_stage', stage: 'New' });
      }
      await configure(account, 'F', 'New', { type: 'move_stage', stage: 'Contacted' });
      const id = await create(account, { email: 'fan@b.co' });
      await move(account, id, 'Contacted');
      await drain(id);
      const all = await events(account, id);
      // The request's move and 10 automation moves.
      expect(all.filter((e) => e.type === 'stage_changed')).toHaveLength(11);
      const outcomes = await results(account, id);
      expect(outcomes.filter((e) => e.type === 'automation_ran')).toHaveLength(10);
      expect(outcomes.some((e) => e.data.reason === 'loop_limit')).toBe(true);
      expect(
        outcomes
          .filter((e) => e.type === 'automation_failed')
          .every((e) => ['loop_limit', 'left_stage'].includes(e.data.reason)),
      ).toBe(true);
    });
  });

  it("names the move's pipeline and stage in the webhook, not the record's pipeline at run time", async () => {
    const account = await crmAccount();
    await putEntity(t, account, 'lead', {
      ...LEAD_ENTITY,
      pipelines: [
        { name: 'P1', stages: ['A', 'B'] },
        { name: 'P2', stages: ['X', 'Y'] },
      ],
    });
    await configure(account, 'Hook', 'X', { type: 'webhook', url: 'https://hooks.example.com/x' }, 'P2');
    const id = await create(account, { email: 'pipes@b.co' });
    const atX = await move(account, id, 'X', 'P2');
    await move(account, id, 'A', 'P1');
    expect(await drain(id)).toEqual([{ enqueued: 'webhook' }]);
    const message = await t.db
      .selectFrom('outbound_messages')
      .select('payload')
      .where('account_id', '=', account.id)
      .where('event_type', '=', 'record.stage_changed')
      .where('destination_id', 'is not', null)
      .where(sql<boolean>`payload->'data'->>'automation' IS NOT NULL`)
      .executeTakeFirstOrThrow();
    expect((message.payload as any).data.crm).toEqual({
      pipeline: 'P2',
      stage: 'X',
      entered_at: atX.crm.entered_at,
    });
  });

  describe('note actions', () => {
    it('fails a note that renders over 10,000 characters and stores nothing', async () => {
      const account = await crmAccount();
      await configure(account, 'Long', 'Won', { type: 'note', body: '{{message}}' });
      const id = await create(account, { email: 'long@b.co', message: 'x'.repeat(10_001) });
      await move(account, id, 'Won');
      expect(await drain(id)).toEqual([{ failed: 'note_too_long' }]);
      const all = await events(account, id);
      expect(all.filter((e) => e.type === 'note_added')).toEqual([]);
      expect(all.find((e) => e.type === 'automation_failed')?.data).toMatchObject({
        reason: 'note_too_long',
        length: 10_001,
        max_length: 10_000,
      });
      // At the bound it is added.
      const fits = await create(account, { email: 'fits@b.co', message: 'y'.repeat(10_000) });
      await move(account, fits, 'Won');
      expect(await drain(fits)).toEqual([{ ran: 'note' }]);
    });

    it('adds no blank note and says so', async () => {
      const account = await crmAccount();
      await configure(account, 'Blank', 'Won', { type: 'note', body: ' {{first_name}} ' });
      const id = await create(account, { email: 'blank@b.co' });
      await move(account, id, 'Won');
      expect(await drain(id)).toEqual([{ failed: 'blank_note' }]);
      const all = await events(account, id);
      expect(all.filter((e) => e.type === 'note_added')).toEqual([]);
      expect(all.filter((e) => e.type === 'automation_ran')).toEqual([]);
      expect(all.find((e) => e.type === 'automation_failed')?.data.reason).toBe('blank_note');
    });
  });

  describe('email actions', () => {
    const emailOf = async (account: TestAccount) => {
      const row = await t.db
        .selectFrom('outbound_messages')
        .select('payload')
        .where('account_id', '=', account.id)
        .where('channel', '=', 'email')
        .executeTakeFirst();
      return row?.payload as { subject: string; text: string; html?: string } | undefined;
    };

    it('keeps links and paragraphs in the text part of an HTML body', async () => {
      const account = await crmAccount();
      await configure(account, 'Link', 'Won', {
        type: 'email',
        to: '{{email}}',
        subject: 'Your link',
        body: '<p>a {{first_name}}</p><p>b</p><a href="http://x/?t={{record_token}}">go</a>',
        record_token_fields: ['phone'],
      });
      const id = await create(account, { email: 'link@b.co', first_name: '<Ann & Bo>' });
      await move(account, id, 'Won');
      expect(await drain(id)).toEqual([{ enqueued: 'email' }]);
      const email = await emailOf(account);
      expect(email?.text).toMatch(/^a <Ann & Bo>\n\nb\n\ngo \[http:\/\/x\/\?t=rt_[A-Za-z0-9_-]+\]$/);
      expect(email?.html).toContain('<p>a &lt;Ann &amp; Bo&gt;</p>');
    });

    it('fails an email whose subject and body render empty', async () => {
      const account = await crmAccount();
      await configure(account, 'Empty', 'Won', {
        type: 'email',
        to: '{{email}}',
        subject: '{{first_name}}',
        body: '<p>{{last_name}}</p>',
      });
      const id = await create(account, { email: 'empty@b.co' });
      await move(account, id, 'Won');
      expect(await drain(id)).toEqual([{ failed: 'empty_email' }]);
      expect(await emailOf(account)).toBeUndefined();
      const [failed] = await results(account, id);
      expect(failed).toMatchObject({ type: 'automation_failed', data: { reason: 'empty_email' } });
    });

    it('fails an email whose subject renders longer than a header line takes', async () => {
      const account = await crmAccount();
      await configure(account, 'Long subject', 'Won', {
        type: 'email',
        to: '{{email}}',
        subject: 'Hi {{message}}',
        body: 'Hello',
      });
      const id = await create(account, { email: 'subject@b.co', message: 'x'.repeat(1_000) });
      await move(account, id, 'Won');
      expect(await drain(id)).toEqual([{ failed: 'subject_too_long' }]);
      expect(await emailOf(account)).toBeUndefined();
      expect((await results(account, id))[0]?.data).toMatchObject({
        reason: 'subject_too_long',
        length: 1_003,
        max_length: 989,
      });
    });
  });
});
