import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, LEAD_ENTITY, putEntity } from '../helpers/fixtures.ts';
import { type Receiver, startReceiver, waitFor } from '../outbound/receiver.ts';
import { type SmtpServer, startSmtpServer } from '../outbound/smtp-server.ts';
import { asPerson, personWithRole } from '../people/support.ts';

const silent = { info() {}, warn() {}, error() {} };

interface HistoryEvent {
  type: string;
  message: string;
  data: Record<string, any>;
  actor: { type: string; name: string };
}

describe.each(TEST_DATABASES)('CRM automations on %s', (kind) => {
  let t: TestApp;
  let smtp: SmtpServer;
  let receiver: Receiver;
  let dispatcher: Dispatcher;
  beforeAll(async () => {
    smtp = await startSmtpServer();
    receiver = await startReceiver();
    t = await startTestApp(kind, {
      queue: {},
      outbound: { smtpUrl: smtp.url, mailFrom: 'Leadline <noreply@leads.test>', retryScheduleMs: [50, 50] },
    });
    dispatcher = createDispatcher(t.services.outbound, silent, { idlePollMs: 20 });
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher?.stop(1_000);
    await t?.close();
    await receiver?.close();
    await smtp?.close();
  });

  /** Each test has its own account, so that automations of one test never run in another. */
  const crmAccount = () => accountWithLeads(t, { modules: ['crm'] });
  /** A new API key of the account holding just `permissions`. */
  const keyOf = async (account: TestAccount, permissions: string[]) =>
    (
      await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: permissions.join(' '), permissions },
      })
    ).json().key as string;
  const configure = (account: TestAccount, body: object) =>
    t.request({ method: 'POST', url: '/api/v1/settings/automations', key: account.apiKey, body });
  const create = async (account: TestAccount, fields: Record<string, unknown>) => {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields },
    });
    expect(response.statusCode).toBe(201);
    return response.json().id as string;
  };
  const move = async (account: TestAccount, id: string, stage: string) => {
    const response = await t.request({
      method: 'POST',
      url: `/api/v1/crm/records/${id}/stage`,
      key: account.apiKey,
      body: { stage },
    });
    expect(response.statusCode).toBe(200);
    return response.json();
  };
  const events = async (account: TestAccount, id: string): Promise<HistoryEvent[]> =>
    (
      await t.request({ method: 'GET', url: `/api/v1/records/${id}/history?limit=500`, key: account.apiKey })
    ).json().events;
  const attemptsOf = async (account: TestAccount, automationId: string, query = '') => {
    const response = await t.request({
      method: 'GET',
      url: `/api/v1/settings/automations/${automationId}/attempts${query}`,
      key: account.apiKey,
    });
    expect(response.statusCode, response.body).toBe(200);
    return response.json() as { attempts: Record<string, any>[]; next_cursor: string | null };
  };
  const resultOf = (account: TestAccount, id: string, count = 1) =>
    waitFor(
      async () => {
        const found = (await events(account, id)).filter((e) => e.type.startsWith('automation_'));
        return found.length >= count && found;
      },
      15_000,
      'automation results',
    );

  describe('happy path', () => {
    it('creates, lists, reads, changes and deletes automations', async () => {
      const account = await crmAccount();
      const created = await configure(account, {
        name: 'Welcome note',
        entity: 'lead',
        stage: 'Contacted',
        action: { type: 'note', body: 'Contacted {{first_name}}' },
      });
      expect(created.statusCode).toBe(201);
      const automation = created.json();
      expect(automation).toEqual({
        id: expect.any(String),
        name: 'Welcome note',
        entity: 'lead',
        pipeline: 'Sales',
        stage: 'Contacted',
        action: { type: 'note', body: 'Contacted {{first_name}}' },
        enabled: true,
        created_at: expect.any(String),
        updated_at: expect.any(String),
      });
      const url = `/api/v1/settings/automations/${automation.id}`;
      const list = await t.request({
        method: 'GET',
        url: '/api/v1/settings/automations',
        key: account.apiKey,
      });
      expect(list.json()).toEqual({ automations: [automation], next_cursor: null });
      const patched = await t.request({
        method: 'PATCH',
        url,
        key: account.apiKey,
        body: { enabled: false, stage: 'Won' },
      });
      expect(patched.json()).toMatchObject({ enabled: false, stage: 'Won', action: automation.action });
      expect((await t.request({ method: 'GET', url, key: account.apiKey })).json().stage).toBe('Won');
      expect((await t.request({ method: 'DELETE', url, key: account.apiKey })).statusCode).toBe(204);
      // An entity with several pipelines: a change that leaves the stage alone keeps its pipeline.
      await t.request({
        method: 'PUT',
        url: '/api/v1/settings/entities/deal',
        key: account.apiKey,
        body: {
          name: 'Deal',
          fields: [{ key: 'email', label: 'Email', type: 'text' }],
          pipelines: [
            { name: 'Sales', stages: ['Open', 'Won'] },
            { name: 'Renewal', stages: ['Due', 'Won'] },
          ],
        },
      });
      const deal = await configure(account, {
        name: 'Renewed',
        entity: 'deal',
        pipeline: 'Renewal',
        stage: 'Won',
        action: { type: 'note', body: 'renewed' },
      });
      expect(deal.json()).toMatchObject({ pipeline: 'Renewal', stage: 'Won' });
      const dealUrl = `/api/v1/settings/automations/${deal.json().id}`;
      const renamed = await t.request({
        method: 'PATCH',
        url: dealUrl,
        key: account.apiKey,
        body: { name: 'R2' },
      });
      expect(renamed.json()).toMatchObject({ name: 'R2', pipeline: 'Renewal', stage: 'Won' });
      const moved = await t.request({
        method: 'PATCH',
        url: dealUrl,
        key: account.apiKey,
        body: { stage: 'Due' },
      });
      expect(moved.json()).toMatchObject({ pipeline: 'Renewal', stage: 'Due' });
      expect((await t.request({ method: 'GET', url, key: account.apiKey })).statusCode).toBe(404);
    });

    it('runs a note action from the queue after the move, with the result in the history', async () => {
      const account = await crmAccount();
      await configure(account, {
        name: 'Note',
        entity: 'lead',
        stage: 'Contacted',
        action: { type: 'note', body: 'Called {{first_name}} ({{record.id}}) in {{stage}}' },
      });
      const id = await create(account, { email: 'note@b.co', first_name: 'Ann' });
      await move(account, id, 'Contacted');
      const [ran] = await resultOf(account, id);
      expect(ran).toMatchObject({ type: 'automation_ran', actor: { type: 'automation', name: 'Note' } });
      const notes = (await events(account, id)).filter((e) => e.type === 'note_added');
      expect(notes.map((n) => n.message)).toEqual([`Called Ann (${id}) in Contacted`]);
      expect(notes[0]?.actor).toEqual({ type: 'automation', name: 'Note' });
      // A move to the same stage runs nothing.
      await move(account, id, 'Contacted');
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect((await events(account, id)).filter((e) => e.type === 'automation_ran')).toHaveLength(1);
    });

    it('posts a signed webhook and records automation_ran once it was delivered', async () => {
      const account = await crmAccount();
      const created = await configure(account, {
        name: 'Tell the CRM',
        entity: 'lead',
        stage: 'Won',
        action: { type: 'webhook', url: receiver.url },
      });
      expect(created.json().secret).toMatch(/^whsec_/);
      const read = await t.request({
        method: 'GET',
        url: `/api/v1/settings/automations/${created.json().id}`,
        key: account.apiKey,
      });
      expect(read.json().secret).toBeUndefined();
      receiver.verifyWith(created.json().secret);
      const id = await create(account, { email: 'hook@b.co' });
      const moved = await move(account, id, 'Won');
      const message = await waitFor(() => receiver.received.find((r) => r.json.data.record.id === id));
      expect(message.json).toMatchObject({
        type: 'record.stage_changed',
        data: {
          crm: { pipeline: 'Sales', stage: 'Won', entered_at: moved.crm.entered_at },
          automation: { name: 'Tell the CRM' },
        },
      });
      const [ran] = await resultOf(account, id);
      expect(ran).toMatchObject({
        type: 'automation_ran',
        data: { message_id: message.headers['webhook-id'] },
      });
      expect(receiver.invalid).toEqual([]);
    });

    it('a change enables a webhook the engine disabled, and rotate_secret signs with both secrets', async () => {
      const own = await startReceiver();
      // A 410 disables the destination at once (decisions §12).
      own.answerNext({ status: 410 });
      try {
        const account = await crmAccount();
        const created = (
          await configure(account, {
            name: 'Gone hook',
            entity: 'lead',
            stage: 'Won',
            action: { type: 'webhook', url: own.url },
          })
        ).json();
        own.verifyWith(created.secret);
        const patch = (body: object) =>
          t.request({
            method: 'PATCH',
            url: `/api/v1/settings/automations/${created.id}`,
            key: account.apiKey,
            body,
          });
        const first = await create(account, { email: 'gone1@b.co' });
        await move(account, first, 'Won');
        expect((await resultOf(account, first))[0]).toMatchObject({
          type: 'automation_failed',
          data: { reason: 'delivery_failed', error: 'http_410' },
        });
        // The receiver is back: any change of the automation enables its destination again.
        const renamed = await patch({ name: 'Hook again' });
        expect(renamed.statusCode).toBe(200);
        expect(renamed.json().secret).toBeUndefined();
        const second = await create(account, { email: 'gone2@b.co' });
        await move(account, second, 'Won');
        expect((await resultOf(account, second))[0]).toMatchObject({ type: 'automation_ran' });

        const rotated = await patch({ rotate_secret: true });
        expect(rotated.statusCode).toBe(200);
        expect(rotated.json().secret).toMatch(/^whsec_/);
        expect(rotated.json().secret).not.toBe(created.secret);
        // For 24 hours each message verifies with the new secret and with the old one.
        own.verifyWith(rotated.json().secret, created.secret);
        const third = await create(account, { email: 'gone3@b.co' });
        await move(account, third, 'Won');
        expect((await resultOf(account, third))[0]).toMatchObject({ type: 'automation_ran' });
        const last = own.received.at(-1)!;
        expect(String(last.headers['webhook-signature']).split(' ')).toHaveLength(2);
        expect(own.invalid).toEqual([]);

        const noWebhook = await patch({ rotate_secret: true, action: { type: 'note', body: 'x' } });
        expect(noWebhook.statusCode).toBe(422);
        expect(noWebhook.json().details).toEqual([expect.objectContaining({ key: 'rotate_secret' })]);
      } finally {
        await own.close();
      }
    });

    it('records automation_failed delivery_failed only after the last retry', async () => {
      const failing = await startReceiver();
      failing.answerAlways({ status: 500 });
      try {
        const account = await crmAccount();
        const created = await configure(account, {
          name: 'Broken hook',
          entity: 'lead',
          stage: 'Won',
          action: { type: 'webhook', url: failing.url },
        });
        failing.verifyWith(created.json().secret);
        const id = await create(account, { email: 'fail@b.co' });
        await move(account, id, 'Won');
        const [failed] = await resultOf(account, id);
        expect(failed).toMatchObject({
          type: 'automation_failed',
          data: { reason: 'delivery_failed', attempts: 3 },
        });
        expect(failing.received).toHaveLength(3);
        // Every attempt, the retries included, is listed under the automation, newest first.
        const messageId = failed!.data.message_id;
        expect(failing.received.map((r) => r.headers['webhook-id'])).toEqual([
          messageId,
          messageId,
          messageId,
        ]);
        const { attempts, next_cursor } = await attemptsOf(account, created.json().id);
        expect(next_cursor).toBeNull();
        expect(attempts.map((a) => [a.attempt, a.outcome, a.status_code])).toEqual([
          [3, 'failed', 500],
          [2, 'failed', 500],
          [1, 'failed', 500],
        ]);
        expect(new Set(attempts.map((a) => a.message_id))).toEqual(new Set([messageId]));
        expect(attempts[0]).toMatchObject({ event: 'record.stage_changed', error: expect.any(String) });
        // Paged with the cursor, without gaps or repeats.
        const first = await attemptsOf(account, created.json().id, '?limit=2');
        expect(first.attempts).toHaveLength(2);
        const rest = await attemptsOf(account, created.json().id, `?limit=2&cursor=${first.next_cursor}`);
        expect([...first.attempts, ...rest.attempts].map((a) => a.id)).toEqual(attempts.map((a) => a.id));
        expect(rest.next_cursor).toBeNull();
      } finally {
        await failing.close();
      }
    });

    it('emails through SMTP with escaped values and a record token that opens its fields', async () => {
      const account = await crmAccount();
      const created = await configure(account, {
        name: 'Ask for a phone number',
        entity: 'lead',
        stage: 'Contacted',
        action: {
          type: 'email',
          to: '{{email}}',
          subject: 'Hello {{first_name}}',
          body: '<p>Hello {{first_name}}, you are {{stage}}. Token: <code>{{record_token}}</code></p>',
          record_token_fields: ['phone'],
          record_token_days: 2,
        },
      });
      expect(created.statusCode).toBe(201);
      const id = await create(account, { email: 'mail@b.co', first_name: '<b>Ann</b>' });
      await move(account, id, 'Contacted');
      const mail = await waitFor(() => smtp.received.find((m) => m.subject === 'Hello <b>Ann</b>'));
      expect(mail.html).toContain('Hello &lt;b&gt;Ann&lt;/b&gt;, you are Contacted.');
      const token = /rt_[A-Za-z0-9_-]+/.exec(String(mail.text))![0];
      const [ran] = await resultOf(account, id);
      expect(ran?.type).toBe('automation_ran');
      // The email's attempt is listed under the automation with the SMTP server's reply.
      const { attempts } = await attemptsOf(account, created.json().id);
      expect(attempts).toHaveLength(1);
      expect(attempts[0]).toMatchObject({
        attempt: 1,
        outcome: 'delivered',
        event: 'automation.email',
        status_code: 250,
        error: null,
      });
      const patched = await t.request({
        method: 'PATCH',
        url: '/api/v1/records',
        key: token,
        body: { fields: { phone: '+49 30 123456', first_name: 'Mallory' } },
      });
      expect(patched.statusCode).toBe(200);
      expect(patched.json()).toMatchObject({
        fields: ['phone'],
        warnings: [{ key: 'first_name', reason: 'not_in_scope' }],
      });
      const stage = await t.request({
        method: 'POST',
        url: `/api/v1/crm/records/${id}/stage`,
        key: token,
        body: { stage: 'Won' },
      });
      expect(stage.statusCode).toBe(401);
    });

    it('records no_recipient when the address field is empty', async () => {
      const account = await crmAccount();
      await putEntity(t, account, 'lead', {
        ...LEAD_ENTITY,
        fields: [
          ...LEAD_ENTITY.fields,
          { key: 'office_email', label: 'Office', type: 'text', format: 'email' },
        ],
      });
      const configured = await configure(account, {
        name: 'Mail the office',
        entity: 'lead',
        stage: 'Won',
        action: { type: 'email', to: '{{office_email}}', subject: 'Hi', body: 'Hi' },
      });
      expect(configured.statusCode).toBe(201);
      const id = await create(account, { email: 'nobody@b.co' });
      await move(account, id, 'Won');
      const [failed] = await resultOf(account, id);
      expect(failed).toMatchObject({ type: 'automation_failed', data: { reason: 'no_recipient' } });
    });

    it('moves a record of an entity with several pipelines to the stage its automation names', async () => {
      const account = await crmAccount();
      const put = await t.request({
        method: 'PUT',
        url: '/api/v1/settings/entities/lead',
        key: account.apiKey,
        body: {
          ...LEAD_ENTITY,
          pipelines: [
            { name: 'Sales', stages: ['New', 'Contacted', 'Won'] },
            { name: 'Support', stages: ['Open', 'Closed'] },
          ],
        },
      });
      expect(put.statusCode, put.body).toBe(200);
      const configured = await configure(account, {
        name: 'Straight to won',
        entity: 'lead',
        pipeline: 'Sales',
        stage: 'Contacted',
        action: { type: 'move_stage', pipeline: 'Sales', stage: 'Won' },
      });
      expect(configured.statusCode, configured.body).toBe(201);
      const id = await create(account, { email: 'twopipes@b.co' });
      const moved = await t.request({
        method: 'POST',
        url: `/api/v1/crm/records/${id}/stage`,
        key: account.apiKey,
        body: { pipeline: 'Sales', stage: 'Contacted' },
      });
      expect(moved.statusCode, moved.body).toBe(200);
      const [ran] = await resultOf(account, id);
      expect(ran).toMatchObject({ type: 'automation_ran' });
      const record = await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey });
      expect(record.json().crm).toMatchObject({ pipeline: 'Sales', stage: 'Won' });
    });

    it('stops a chain of move_stage automations after 10 moves with loop_limit', async () => {
      const account = await crmAccount();
      await configure(account, {
        name: 'Back',
        entity: 'lead',
        stage: 'Contacted',
        action: { type: 'move_stage', stage: 'New' },
      });
      await configure(account, {
        name: 'Forth',
        entity: 'lead',
        stage: 'New',
        action: { type: 'move_stage', stage: 'Contacted' },
      });
      const id = await create(account, { email: 'loop@b.co' });
      await move(account, id, 'Contacted');
      const failed = await waitFor(
        async () => (await events(account, id)).find((e) => e.type === 'automation_failed'),
        20_000,
        'the loop limit',
      );
      expect(failed.data.reason).toBe('loop_limit');
      const all = await events(account, id);
      expect(all.filter((e) => e.type === 'stage_changed')).toHaveLength(11);
      expect(all.filter((e) => e.type === 'automation_ran')).toHaveLength(10);
    });
    it('runs each job once: a retried or repeated job moves, notes and sends nothing twice', async () => {
      const account = await crmAccount();
      const configured = async (name: string, stage: string, action: object) =>
        (await configure(account, { name, entity: 'lead', stage, action })).json();
      // Configured on stages no move of this test enters: the runs below are started by hand.
      const mover = await configured('Win', 'New', { type: 'move_stage', stage: 'Won' });
      const noter = await configured('Remember', 'New', { type: 'note', body: 'In {{stage}}' });
      const hook = await configured('Hook', 'New', { type: 'webhook', url: receiver.url });
      receiver.verifyWith(hook.secret);
      const id = await create(account, { email: 'retry@b.co' });
      const runTwice = async (automationId: string) => {
        const jobId = randomUUID();
        const payload = { accountId: account.id, recordId: id, automationId, stage: 'New', chain: 0 };
        // Two attempts at once (an expired attempt still running beside its retry), then a retry.
        const answers = await Promise.all([
          t.services.automations.run(jobId, payload),
          t.services.automations.run(jobId, payload),
        ]);
        answers.push(await t.services.automations.run(jobId, payload));
        return answers;
      };
      const moveAnswers = await runTwice(mover.id);
      expect(moveAnswers.filter((a) => 'ran' in a)).toEqual([{ ran: 'move_stage' }]);
      expect(moveAnswers.filter((a) => 'skipped' in a)).toEqual([
        { skipped: 'already_ran' },
        { skipped: 'already_ran' },
      ]);
      expect((await runTwice(noter.id)).filter((a) => 'ran' in a)).toEqual([{ ran: 'note' }]);
      expect((await runTwice(hook.id)).filter((a) => 'enqueued' in a)).toEqual([{ enqueued: 'webhook' }]);

      const history = await t.request({
        method: 'GET',
        url: `/api/v1/records/${id}/history`,
        key: account.apiKey,
      });
      const { events: all, stages } = history.json() as { events: HistoryEvent[]; stages: unknown[] };
      expect(all.filter((e) => e.type === 'stage_changed')).toHaveLength(1);
      expect(stages).toHaveLength(2);
      expect(all.filter((e) => e.type === 'note_added')).toHaveLength(1);
      await waitFor(() => receiver.received.some((r) => r.json.data.record.id === id));
      const ran = await resultOf(account, id, 3);
      expect(ran.map((e) => e.data.automation).sort()).toEqual(['Hook', 'Remember', 'Win']);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(receiver.received.filter((r) => r.json.data.record.id === id)).toHaveLength(1);
      expect((await events(account, id)).filter((e) => e.type.startsWith('automation_'))).toHaveLength(3);
    });
  });

  describe('errors', () => {
    it('refuses unknown stages, fields and types, and distribute, when configured', async () => {
      const account = await crmAccount();
      const base = { name: 'x', entity: 'lead', stage: 'Won' };
      const cases: [object, string, string][] = [
        [{ ...base, stage: 'Lost', action: { type: 'note', body: 'x' } }, 'stage', 'not_allowed'],
        [{ ...base, action: { type: 'note', body: 'Hi {{nickname}}' } }, 'action.body', 'unknown_field'],
        [{ ...base, action: { type: 'sms', body: 'x' } }, 'action.type', 'not_allowed'],
        [{ ...base, action: { type: 'distribute' } }, 'action.type', 'module_not_enabled'],
        [{ ...base, action: { type: 'move_stage', stage: 'Lost' } }, 'action.stage', 'not_allowed'],
        [{ ...base, action: { type: 'webhook', url: 'ftp://x.test/' } }, 'action.url', 'invalid_format'],
        [{ ...base, action: { type: 'webhook' } }, 'action.url', 'required'],
        [
          { ...base, action: { type: 'note', body: 'x', url: 'https://x.test' } },
          'action.url',
          'not_allowed',
        ],
        [
          { ...base, action: { type: 'email', to: 'nobody', subject: 's', body: 'b' } },
          'action.to',
          'invalid_format',
        ],
        [
          { ...base, action: { type: 'email', to: '{{nick}}', subject: 's', body: 'b' } },
          'action.to',
          'unknown_field',
        ],
        [
          // A field that holds no email address: refused now, not found out at run time.
          { ...base, action: { type: 'email', to: '{{company}}', subject: 's', body: 'b' } },
          'action.to',
          'not_allowed',
        ],
        [
          { ...base, action: { type: 'email', to: 'a@b.co', subject: 's', body: '{{record_token}}' } },
          'action.record_token_fields',
          'required',
        ],
        [
          // A note mints no record token: the variable would always be empty.
          { ...base, action: { type: 'note', body: 'token {{record_token}}' } },
          'action.body',
          'not_allowed',
        ],
        [{ ...base, entity: 'nothing', action: { type: 'note', body: 'x' } }, 'entity', 'unknown_entity'],
        // A name of blanks only names nothing: refused, not stored.
        [{ ...base, name: ' \t ', action: { type: 'note', body: 'x' } }, 'name', 'required'],
      ];
      for (const [body, key, reason] of cases) {
        const response = await configure(account, body);
        expect(response.statusCode, JSON.stringify(body)).toBe(422);
        expect(response.json().details, JSON.stringify(body)).toContainEqual(
          expect.objectContaining({ key }),
        );
        if (reason !== 'not_allowed' || key !== 'action.type') {
          expect(response.json().details.find((d: { key: string }) => d.key === key).reason).toBe(reason);
        }
      }
      // Decisions §7: distribute without the module is "refused with 422 module_not_enabled":
      // the code names it when it is the only problem; beside others it is one detail of them.
      const distribute = await configure(account, { ...base, action: { type: 'distribute' } });
      expect(distribute.json()).toEqual({
        error: 'module_not_enabled',
        details: [{ key: 'action.type', reason: 'module_not_enabled', message: expect.any(String) }],
      });
      const mixed = await configure(account, { ...base, stage: 'Lost', action: { type: 'distribute' } });
      expect(mixed.statusCode).toBe(422);
      expect(mixed.json().error).toBe('validation_failed');
      expect(
        mixed
          .json()
          .details.map((d: { reason: string }) => d.reason)
          .sort(),
      ).toEqual(['module_not_enabled', 'not_allowed']);
      const list = await t.request({
        method: 'GET',
        url: '/api/v1/settings/automations',
        key: account.apiKey,
      });
      expect(list.json().automations).toEqual([]);
    });
  });

  describe('entity changes', () => {
    const TMP = {
      name: 'Tmp',
      fields: [
        { key: 'a', label: 'A', type: 'text' },
        { key: 'email', label: 'Email', type: 'text', format: 'email' },
        { key: 'phone', label: 'Phone', type: 'text' },
      ],
      pipelines: [{ name: 'Main', stages: ['S1', 'S2', 'S3'] }],
    };
    const putTmp = (account: TestAccount, definition: object) =>
      t.request({
        method: 'PUT',
        url: '/api/v1/settings/entities/tmp',
        key: account.apiKey,
        body: definition,
      });
    const automationOn = async (account: TestAccount, name: string, stage: string, action: object) => {
      const response = await configure(account, { name, entity: 'tmp', stage, action });
      expect(response.statusCode, response.body).toBe(201);
      return response.json().id as string;
    };
    /** The refusal's details as `key: reason`, and its messages. */
    const refusal = (response: { statusCode: number; json(): any }) => {
      expect(response.statusCode).toBe(422);
      expect(response.json().error).toBe('validation_failed');
      const details = response.json().details as { key: string; reason: string; message: string }[];
      return {
        keys: details.map((d) => `${d.key}: ${d.reason}`).sort(),
        messages: details.map((d) => d.message),
      };
    };

    it('refuses a change that leaves an enabled automation without its field, stage or email field', async () => {
      const account = await crmAccount();
      expect((await putTmp(account, TMP)).statusCode).toBe(200);
      const note = await automationOn(account, 'note', 'S2', { type: 'note', body: 'A is {{a}}' });
      const email = await automationOn(account, 'email', 'S2', {
        type: 'email',
        to: '{{email}}',
        subject: 's',
        body: 'b',
      });
      const onward = await automationOn(account, 'onward', 'S1', { type: 'move_stage', stage: 'S3' });
      const link = await automationOn(account, 'link', 'S1', {
        type: 'email',
        to: 'desk@leads.test',
        subject: 's',
        body: '{{record_token}}',
        record_token_fields: ['phone'],
      });
      // A disabled automation runs nowhere: a change may leave it behind (enabling it is checked).
      const off = await automationOn(account, 'off', 'S2', { type: 'note', body: '{{a}}' });
      await t.request({
        method: 'PATCH',
        url: `/api/v1/settings/automations/${off}`,
        key: account.apiKey,
        body: { enabled: false },
      });

      // Only field b: the note's {{a}}, the email's {{email}} and the token's phone are gone.
      const fieldsGone = refusal(
        await putTmp(account, { ...TMP, fields: [{ key: 'b', label: 'B', type: 'text' }] }),
      );
      expect(fieldsGone.keys).toEqual(
        [
          `automations.${note}.action.body: used_by_automation`,
          `automations.${email}.action.to: used_by_automation`,
          `automations.${link}.action.record_token_fields: used_by_automation`,
        ].sort(),
      );
      expect(fieldsGone.messages).toContainEqual(expect.stringMatching(/^automation "note": \{\{a\}\}/));
      // The email field without its format holds no address any more.
      const [, emailField, phone] = TMP.fields;
      const noFormat = refusal(
        await putTmp(account, { ...TMP, fields: [TMP.fields[0], { ...emailField, format: null }, phone] }),
      );
      expect(noFormat.keys).toEqual([`automations.${email}.action.to: used_by_automation`]);
      // S3 left out: the move has no target; S2 left out: two automations have no stage to run on.
      expect(
        refusal(await putTmp(account, { ...TMP, pipelines: [{ name: 'Main', stages: ['S1', 'S2'] }] })).keys,
      ).toEqual([`automations.${onward}.action.stage: used_by_automation`]);
      const s2Gone = refusal(
        await putTmp(account, { ...TMP, pipelines: [{ name: 'Main', stages: ['S1', 'S3'] }] }),
      );
      expect(s2Gone.keys).toEqual(
        [
          `automations.${note}.stage: used_by_automation`,
          `automations.${email}.stage: used_by_automation`,
        ].sort(),
      );
      expect(s2Gone.messages).toContainEqual(
        'automation "note" runs on stage S2 of Main, which the definition leaves out',
      );
      // The pipeline left out (another in its place): every stage is gone, and the move's pipeline.
      expect(
        refusal(await putTmp(account, { ...TMP, pipelines: [{ name: 'Other', stages: ['S1', 'S2', 'S3'] }] }))
          .keys,
      ).toEqual(
        [note, email, onward, link]
          .map((id) => `automations.${id}.stage: used_by_automation`)
          .concat(`automations.${onward}.action.pipeline: used_by_automation`)
          .sort(),
      );

      // Nothing was changed: the definition is as it was, the automations enabled and running.
      const entity = await t.request({
        method: 'GET',
        url: '/api/v1/settings/entities/tmp',
        key: account.apiKey,
      });
      expect(entity.json()).toMatchObject({
        fields: [{ key: 'a' }, { key: 'email', format: 'email' }, { key: 'phone' }],
        pipelines: [{ name: 'Main', stages: ['S1', 'S2', 'S3'] }],
      });
      const list = await t.request({
        method: 'GET',
        url: '/api/v1/settings/automations',
        key: account.apiKey,
      });
      expect(list.json().automations.map((a: { enabled: boolean }) => a.enabled)).toEqual([
        true,
        true,
        true,
        true,
        false,
      ]);
      const record = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'tmp', fields: { a: 'x', email: 'x@leads.test' } },
      });
      const id = record.json().id as string;
      await move(account, id, 'S2');
      const ran = await resultOf(account, id, 2);
      expect(ran.map((e) => e.type)).toEqual(['automation_ran', 'automation_ran']);
      const notes = (await events(account, id)).filter((e) => e.type === 'note_added');
      expect(notes.map((e) => e.message)).toEqual(['A is x']);

      // A change that leaves alone what they use is saved; so is one once they were changed or removed.
      expect(
        (await putTmp(account, { ...TMP, fields: [...TMP.fields, { key: 'c', label: 'C', type: 'text' }] }))
          .statusCode,
      ).toBe(200);
      for (const removed of [note, email, link]) {
        await t.request({
          method: 'DELETE',
          url: `/api/v1/settings/automations/${removed}`,
          key: account.apiKey,
        });
      }
      const changed = await putTmp(account, { ...TMP, fields: [{ key: 'b', label: 'B', type: 'text' }] });
      expect(changed.statusCode, changed.body).toBe(200);
    });

    it('lets a disabled automation whose stage was removed be renamed, and names that stage when it is enabled', async () => {
      const account = await crmAccount();
      expect((await putTmp(account, TMP)).statusCode).toBe(200);
      const off = await automationOn(account, 'off', 'S2', { type: 'note', body: '{{a}}' });
      const patch = (body: object) =>
        t.request({ method: 'PATCH', url: `/api/v1/settings/automations/${off}`, key: account.apiKey, body });
      expect((await patch({ enabled: false })).statusCode).toBe(200);
      const s2Gone = await putTmp(account, { ...TMP, pipelines: [{ name: 'Main', stages: ['S1', 'S3'] }] });
      expect(s2Gone.statusCode, s2Gone.body).toBe(200);
      const renamed = await patch({ name: 'kept for later' });
      expect(renamed.statusCode, renamed.body).toBe(200);
      expect(renamed.json()).toMatchObject({ name: 'kept for later', stage: 'S2', enabled: false });
      const enabled = refusal(await patch({ enabled: true }));
      expect(enabled.keys).toEqual(['stage: not_allowed']);
      expect(enabled.messages[0]).toMatch(/^the stage S2 of Main was removed from tmp/);
      const moved = await patch({ enabled: true, stage: 'S3' });
      expect(moved.statusCode, moved.body).toBe(200);
      expect(moved.json()).toMatchObject({ stage: 'S3', enabled: true });
    });

    it('names only what the change breaks, not what an automation lacked before', async () => {
      const account = await crmAccount();
      expect((await putTmp(account, TMP)).statusCode).toBe(200);
      const legacy = await automationOn(account, 'legacy', 'S2', { type: 'note', body: 'A is {{a}}' });
      // Saved before the check existed: a note with {{record_token}}, which can never render.
      await t.db
        .updateTable('automations')
        .set({ config: JSON.stringify({ type: 'note', body: '{{record_token}} {{a}}' }) })
        .where('account_id', '=', account.id)
        .where('id', '=', legacy)
        .execute();
      const addField = await putTmp(account, {
        ...TMP,
        fields: [...TMP.fields, { key: 'c', label: 'C', type: 'text' }],
      });
      expect(addField.statusCode, addField.body).toBe(200);
      const dropA = refusal(await putTmp(account, { ...TMP, fields: TMP.fields.slice(1) }));
      expect(dropA.keys).toEqual([`automations.${legacy}.action.body: used_by_automation`]);
      expect(dropA.messages).toEqual(['automation "legacy": {{a}} names no field of tmp']);
    });
  });

  describe('security', () => {
    it("answers 404 for another account's automation and 403 without the module or permission", async () => {
      const account = await crmAccount();
      const other = await crmAccount();
      const created = await configure(account, {
        name: 'Mine',
        entity: 'lead',
        stage: 'Won',
        action: { type: 'note', body: 'x' },
      });
      const url = `/api/v1/settings/automations/${created.json().id}`;
      expect((await t.request({ method: 'GET', url, key: other.apiKey })).statusCode).toBe(404);
      expect((await t.request({ method: 'GET', url: `${url}/attempts`, key: other.apiKey })).statusCode).toBe(
        404,
      );
      // A note sends no message: its automation has no attempts (the result is in the history).
      expect((await attemptsOf(account, created.json().id)).attempts).toEqual([]);
      expect(
        (await t.request({ method: 'PATCH', url, key: other.apiKey, body: { enabled: false } })).statusCode,
      ).toBe(404);
      expect((await t.request({ method: 'DELETE', url, key: other.apiKey })).statusCode).toBe(404);
      const plain = await accountWithLeads(t);
      const refused = await configure(plain, {
        name: 'x',
        entity: 'lead',
        stage: 'Won',
        action: { type: 'note', body: 'x' },
      });
      expect(refused.statusCode).toBe(403);
      expect(refused.json().error).toBe('module_not_enabled');
      const reader = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'Reader', permissions: ['records:read', 'crm'] },
      });
      const list = await t.request({
        method: 'GET',
        url: '/api/v1/settings/automations',
        key: reader.json().key,
      });
      expect(list.statusCode).toBe(403);
      const attempts = await t.request({ method: 'GET', url: `${url}/attempts`, key: reader.json().key });
      expect(attempts.statusCode).toBe(403);
      const unknown = await t.request({
        method: 'GET',
        url: `/api/v1/settings/automations/${randomUUID()}/attempts`,
        key: account.apiKey,
      });
      expect(unknown.statusCode).toBe(404);
    });

    it('lets an API key set up an email or webhook action only with records:read beside settings', async () => {
      const account = await crmAccount();
      const keyWith = (permissions: string[]) => keyOf(account, permissions);
      const settingsOnly = await keyWith(['settings']);
      const reading = await keyWith(['settings', 'records:read']);
      const as = (key: string, method: 'POST' | 'PATCH', url: string, body: object) =>
        t.request({ method, url, key, body });
      const automation = (action: object) => ({ name: randomUUID(), entity: 'lead', stage: 'Won', action });
      // Both send record data where the key's holder says: any address, any URL.
      const email = {
        type: 'email',
        to: 'thief@elsewhere.test',
        subject: 'Lead',
        body: '{{email}} {{phone}}',
      };
      const webhook = { type: 'webhook', url: 'https://elsewhere.test/hook' };
      for (const action of [email, webhook]) {
        const refused = await as(settingsOnly, 'POST', '/api/v1/settings/automations', automation(action));
        expect(refused.statusCode, action.type).toBe(403);
        expect(refused.json()).toEqual({ error: 'forbidden' });
      }
      const listed = async () =>
        (await t.request({ method: 'GET', url: '/api/v1/settings/automations', key: account.apiKey })).json()
          .automations as { id: string; action: { type: string } }[];
      expect(await listed()).toEqual([]);
      // Notes and stage moves stay the settings permission's.
      const note = await as(
        settingsOnly,
        'POST',
        '/api/v1/settings/automations',
        automation({ type: 'note', body: 'Won: {{email}}' }),
      );
      expect(note.statusCode, note.body).toBe(201);
      const moving = await as(
        settingsOnly,
        'POST',
        '/api/v1/settings/automations',
        automation({ type: 'move_stage', stage: 'Contacted' }),
      );
      expect(moving.statusCode, moving.body).toBe(201);
      const noteUrl = `/api/v1/settings/automations/${note.json().id}`;
      expect((await as(settingsOnly, 'PATCH', noteUrl, { name: 'Renamed note' })).statusCode).toBe(200);
      // Turning a note into an email or webhook is refused, and the note stays.
      for (const action of [email, webhook]) {
        const refused = await as(settingsOnly, 'PATCH', noteUrl, { action });
        expect(refused.statusCode, action.type).toBe(403);
        expect(refused.json()).toEqual({ error: 'forbidden' });
      }
      expect((await t.request({ method: 'GET', url: noteUrl, key: account.apiKey })).json().action).toEqual({
        type: 'note',
        body: 'Won: {{email}}',
      });
      // With records:read a key may; then any change of a sending automation needs it too.
      const sending = await as(reading, 'POST', '/api/v1/settings/automations', automation(webhook));
      expect(sending.statusCode, sending.body).toBe(201);
      const sendingUrl = `/api/v1/settings/automations/${sending.json().id}`;
      for (const change of [{ stage: 'New' }, { enabled: true }, { rotate_secret: true }]) {
        const refused = await as(settingsOnly, 'PATCH', sendingUrl, change);
        expect(refused.statusCode, JSON.stringify(change)).toBe(403);
      }
      expect((await t.request({ method: 'GET', url: sendingUrl, key: account.apiKey })).json().stage).toBe(
        'Won',
      );
      expect((await as(reading, 'PATCH', sendingUrl, { action: email })).statusCode).toBe(200);
      // Making it send nothing any more needs no more than settings.
      const quiet = await as(settingsOnly, 'PATCH', sendingUrl, { action: { type: 'note', body: 'x' } });
      expect(quiet.statusCode, quiet.body).toBe(200);
      expect((await listed()).map((a) => a.action.type).sort()).toEqual(['move_stage', 'note', 'note']);
      // A signed-in admin is bounded by the role, as for account webhooks.
      const admin = await personWithRole(t, account, 'admin');
      const byAdmin = await asPerson(t, admin, {
        method: 'POST',
        url: '/api/v1/settings/automations',
        body: automation(email),
      });
      expect(byAdmin.statusCode, byAdmin.body).toBe(201);
    });

    it('lets an API key set up a distribute action only with distribution beside settings', async () => {
      const account = await accountWithLeads(t, { modules: ['crm', 'distribution'] });
      // A distribute action needs a distribution of its entity (422 no_distribution without).
      await t.request({
        method: 'PUT',
        url: '/api/v1/settings/distributions/lead',
        key: account.apiKey,
        body: {},
      });
      const keyWith = (permissions: string[]) => keyOf(account, permissions);
      const settingsOnly = await keyWith(['settings', 'records:read']);
      const distributing = await keyWith(['settings', 'distribution']);
      const automation = { name: 'Sell won', entity: 'lead', stage: 'Won', action: { type: 'distribute' } };
      const post = (key: string, body: object) =>
        t.request({ method: 'POST', url: '/api/v1/settings/automations', key, body });
      // A run delivers records to paying partners: the endpoint needs `distribution`, so does this.
      const refused = await post(settingsOnly, automation);
      expect(refused.statusCode, refused.body).toBe(403);
      expect(refused.json()).toEqual({ error: 'forbidden' });
      const note = await post(settingsOnly, { ...automation, action: { type: 'note', body: 'Won' } });
      expect(note.statusCode, note.body).toBe(201);
      const noteUrl = `/api/v1/settings/automations/${note.json().id}`;
      const patched = await t.request({
        method: 'PATCH',
        url: noteUrl,
        key: settingsOnly,
        body: { action: { type: 'distribute' } },
      });
      expect(patched.statusCode, patched.body).toBe(403);
      const allowed = await post(distributing, { ...automation, name: 'Sell won 2' });
      expect(allowed.statusCode, allowed.body).toBe(201);
    });
  });
});
