import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { startReceiver, waitFor } from '../outbound/receiver.ts';

const silent = { info() {}, warn() {}, error() {} };

/** Decisions §7: an automation's mistakes are found when it is configured, never when it runs. */
describe.each(TEST_DATABASES)('CRM automation configuration on %s', (kind) => {
  let t: TestApp;
  let dispatcher: Dispatcher;
  beforeAll(async () => {
    t = await startTestApp(kind, { queue: {}, outbound: { retryScheduleMs: [50] } });
    dispatcher = createDispatcher(t.services.outbound, silent, { idlePollMs: 20 });
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher?.stop(1_000);
    await t?.close();
  });

  const call = (account: TestAccount, method: string, url: string, body?: object) =>
    t.request({ method: method as 'GET', url, key: account.apiKey, ...(body ? { body } : {}) });
  const configure = (account: TestAccount, body: object) =>
    call(account, 'POST', '/api/v1/settings/automations', body);
  const patch = (account: TestAccount, id: string, body: object) =>
    call(account, 'PATCH', `/api/v1/settings/automations/${id}`, body);
  /** A refusal's details as `key: reason`. */
  const refusal = (response: { statusCode: number; body: string; json(): any }) => {
    expect(response.statusCode, response.body).toBe(422);
    expect(response.json().error).toBe('validation_failed');
    return (response.json().details as { key: string; reason: string }[]).map((d) => `${d.key}: ${d.reason}`);
  };
  const base = { name: 'x', entity: 'lead', stage: 'Won' };

  it("refuses an email's `to` with anything around its {{field}}", async () => {
    const account = await accountWithLeads(t, { modules: ['crm'] });
    const email = (to: string) =>
      configure(account, { ...base, action: { type: 'email', to, subject: 's', body: 'b' } });
    for (const to of [
      'x{{email}}',
      '{{email}}.evil.com',
      '{{email}}@evil.com',
      '{{email}}{{email}}',
      '{{e-mail}}',
    ]) {
      expect(refusal(await email(to)), to).toEqual(['action.to: invalid_format']);
    }
    expect(refusal(await email('{{nick}}'))).toEqual(['action.to: unknown_field']);
    // Exactly one variable, blanks around and inside it allowed; or an address.
    for (const to of [' {{ email }} ', '{{email}}', 'desk@leads.test']) {
      const response = await email(to);
      expect(response.statusCode, `${to}: ${response.body}`).toBe(201);
    }
  });

  it('refuses a malformed {{variable}} in a template, and keeps single braces as text', async () => {
    const account = await accountWithLeads(t, { modules: ['crm'] });
    const note = (body: string) => configure(account, { ...base, action: { type: 'note', body } });
    const malformed = await note('{{first-name}} {{ }} {{{first_name}}}');
    expect(refusal(malformed)).toEqual([
      'action.body: invalid_format',
      'action.body: invalid_format',
      'action.body: invalid_format',
    ]);
    expect(malformed.json().details.map((d: { message: string }) => d.message)).toEqual([
      expect.stringMatching(/^\{\{first-name\}\} is no variable/),
      expect.stringMatching(/^\{\{ \}\} is no variable/),
      expect.stringMatching(/^\{\{\{first_name\}\} is no variable/),
    ]);
    expect(refusal(await note('Hi {{first_name, welcome'))).toEqual(['action.body: invalid_format']);
    const subject = await configure(account, {
      ...base,
      action: { type: 'email', to: '{{email}}', subject: 'Hi {{first name}}', body: 'b' },
    });
    expect(refusal(subject)).toEqual(['action.subject: invalid_format']);
    for (const body of ['{x} and {{ first_name }}', '<style>a{color:red}}</style>{{stage}}', 'a }} b']) {
      const response = await note(body);
      expect(response.statusCode, `${body}: ${response.body}`).toBe(201);
    }
  });

  it('lets a disabled move_stage automation whose target was removed be renamed, and checks it when enabled', async () => {
    const account = await accountWithLeads(t, { modules: ['crm'] });
    const TMP = {
      name: 'Tmp',
      fields: [{ key: 'a', label: 'A', type: 'text' }],
      pipelines: [{ name: 'Main', stages: ['S1', 'S2', 'S3'] }],
    };
    const putTmp = (pipelines: object) =>
      call(account, 'PUT', '/api/v1/settings/entities/tmp', { ...TMP, pipelines });
    expect((await putTmp(TMP.pipelines)).statusCode).toBe(200);
    const created = await configure(account, {
      name: 'w2l',
      entity: 'tmp',
      stage: 'S1',
      action: { type: 'move_stage', stage: 'S3' },
      enabled: false,
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    const archived = await putTmp([{ name: 'Main', stages: ['S1', 'S2'] }]);
    expect(archived.statusCode, archived.body).toBe(200);

    const renamed = await patch(account, id, { name: 'w2l-renamed' });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json()).toMatchObject({
      name: 'w2l-renamed',
      enabled: false,
      action: { type: 'move_stage', pipeline: 'Main', stage: 'S3' },
    });
    // As the console saves it: the whole action, naming the same target.
    const resent = await patch(account, id, {
      name: 'w2l again',
      action: { type: 'move_stage', pipeline: 'Main', stage: 'S3' },
    });
    expect(resent.statusCode, resent.body).toBe(200);
    // Another target that does not exist is a mistake, disabled or not.
    expect(refusal(await patch(account, id, { action: { type: 'move_stage', stage: 'S9' } }))).toEqual([
      'action.stage: not_allowed',
    ]);
    // Enabling checks the target again.
    expect(refusal(await patch(account, id, { enabled: true }))).toEqual(['action.stage: not_allowed']);
    const retargeted = await patch(account, id, {
      enabled: true,
      action: { type: 'move_stage', stage: 'S2' },
    });
    expect(retargeted.statusCode, retargeted.body).toBe(200);
    expect(retargeted.json()).toMatchObject({ enabled: true, action: { stage: 'S2' } });
  });

  it('lets a disabled automation whose template names a field removed since be renamed, and checks it when enabled', async () => {
    const account = await accountWithLeads(t, { modules: ['crm'] });
    const TMP = {
      name: 'Tmp',
      fields: [
        { key: 'a', label: 'A', type: 'text' },
        { key: 'b', label: 'B', type: 'text' },
      ],
      pipelines: [{ name: 'Main', stages: ['S1', 'S2'] }],
    };
    const putTmp = (fields: object[]) =>
      call(account, 'PUT', '/api/v1/settings/entities/tmp', { ...TMP, fields });
    expect((await putTmp(TMP.fields)).statusCode).toBe(200);
    const action = { type: 'note', body: 'Call about {{b}} ({{a}})' };
    const created = await configure(account, {
      name: 'n',
      entity: 'tmp',
      stage: 'S1',
      action,
      enabled: false,
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    const removed = await putTmp([TMP.fields[0]!]);
    expect(removed.statusCode, removed.body).toBe(200);

    const renamed = await patch(account, id, { name: 'n-renamed' });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json()).toMatchObject({ name: 'n-renamed', enabled: false, action });
    // As the console saves it: the whole action as it was, and another stage.
    const resent = await patch(account, id, { name: 'n again', stage: 'S2', action });
    expect(resent.statusCode, resent.body).toBe(200);
    // A changed action is checked as a new one, disabled or not.
    expect(refusal(await patch(account, id, { action: { type: 'note', body: 'Call {{b}} now' } }))).toEqual([
      'action.body: unknown_field',
    ]);
    // Enabling checks the action again.
    expect(refusal(await patch(account, id, { enabled: true }))).toEqual(['action.body: unknown_field']);
    const mended = await patch(account, id, {
      enabled: true,
      action: { type: 'note', body: 'Call ({{a}})' },
    });
    expect(mended.statusCode, mended.body).toBe(200);
    expect(mended.json()).toMatchObject({ enabled: true, action: { body: 'Call ({{a}})' } });
  });

  it('refuses unknown query parameters on every S2 CRM route', async () => {
    const account = await accountWithLeads(t, { modules: ['crm'] });
    const record = await call(account, 'POST', '/api/v1/records', {
      entity: 'lead',
      fields: { email: 'query@leads.test' },
    });
    const recordId = record.json().id as string;
    const created = await configure(account, { ...base, action: { type: 'note', body: 'x' } });
    const automation = `/api/v1/settings/automations/${created.json().id}`;
    const requests: [string, string, object?][] = [
      ['GET', '/api/v1/crm/pipelines?foo=1'],
      ['POST', `/api/v1/crm/records/${recordId}/stage?foo=1`, { stage: 'Contacted' }],
      ['POST', '/api/v1/settings/automations?foo=1', { ...base, action: { type: 'note', body: 'y' } }],
      ['GET', '/api/v1/settings/automations?foo=1'],
      ['GET', `${automation}?foo=1`],
      ['PATCH', `${automation}?foo=1`, { name: 'z' }],
      ['GET', `${automation}/attempts?foo=1`],
      ['DELETE', `${automation}?foo=1`],
    ];
    for (const [method, url, body] of requests) {
      const response = await call(account, method, url, body);
      expect(response.statusCode, `${method} ${url}`).toBe(422);
      expect(response.json().details, `${method} ${url}`).toEqual([
        expect.objectContaining({ key: 'foo', reason: 'unknown_key' }),
      ]);
    }
    // Nothing was done: the record did not move, the automation is as it was.
    const read = await call(account, 'GET', `/api/v1/records/${recordId}`);
    expect(read.json().crm.stage).toBe('New');
    expect((await call(account, 'GET', automation)).json()).toMatchObject({ name: 'x' });
    expect((await call(account, 'GET', '/api/v1/crm/pipelines')).statusCode).toBe(200);
    // S1 keeps taking any parameter, as S1 clients send what they send.
    const s1 = await call(account, 'PATCH', `/api/leads/${recordId}/status?foo=1`, {
      status_step: 'Contacted',
    });
    expect(s1.statusCode, s1.body).toBe(200);
  });

  it("shows a webhook action's destination, disabled by a 410 until a change enables it", async () => {
    const receiver = await startReceiver();
    receiver.answerNext({ status: 410 });
    try {
      const account = await accountWithLeads(t, { modules: ['crm'] });
      const created = await configure(account, { ...base, action: { type: 'webhook', url: receiver.url } });
      expect(created.json().destination).toEqual({
        enabled: true,
        disabled_reason: null,
        failing_since: null,
      });
      const id = created.json().id as string;
      receiver.verifyWith(created.json().secret);
      const record = await call(account, 'POST', '/api/v1/records', {
        entity: 'lead',
        fields: { email: 'gone@leads.test' },
      });
      const moved = await call(account, 'POST', `/api/v1/crm/records/${record.json().id}/stage`, {
        stage: 'Won',
      });
      expect(moved.statusCode, moved.body).toBe(200);
      const disabled = await waitFor(
        async () => {
          const automation = (await call(account, 'GET', `/api/v1/settings/automations/${id}`)).json();
          return automation.destination.enabled === false && automation;
        },
        15_000,
        'the destination disabled',
      );
      expect(disabled).toMatchObject({
        enabled: true,
        destination: { enabled: false, disabled_reason: 'gone' },
      });
      const listed = (await call(account, 'GET', '/api/v1/settings/automations')).json().automations;
      expect(listed[0].destination).toMatchObject({ enabled: false, disabled_reason: 'gone' });
      // Any change enables it again; an action that sends nothing has no destination.
      const renamed = await patch(account, id, { name: 'back' });
      expect(renamed.json().destination).toEqual({
        enabled: true,
        disabled_reason: null,
        failing_since: null,
      });
      const note = await patch(account, id, { action: { type: 'note', body: 'x' } });
      expect(note.json()).not.toHaveProperty('destination');
    } finally {
      await receiver.close();
    }
  });

  it('refuses an enabled distribute action on an entity without a distribution', async () => {
    const account = await accountWithLeads(t, { modules: ['crm', 'distribution'] });
    const distribute = { ...base, action: { type: 'distribute' } };
    expect(refusal(await configure(account, distribute))).toEqual(['action.type: no_distribution']);
    // Saved disabled, it waits for the distribution; enabling it checks.
    const disabled = await configure(account, { ...distribute, enabled: false });
    expect(disabled.statusCode, disabled.body).toBe(201);
    const id = disabled.json().id as string;
    expect(refusal(await patch(account, id, { enabled: true }))).toEqual(['action.type: no_distribution']);
    const setUp = await call(account, 'PUT', '/api/v1/settings/distributions/lead', {});
    expect(setUp.statusCode, setUp.body).toBe(200);
    const enabled = await patch(account, id, { enabled: true });
    expect(enabled.statusCode, enabled.body).toBe(200);
    // A distribution switched off is a pause, not a mistake: the automation stays and can change.
    const off = await call(account, 'PUT', '/api/v1/settings/distributions/lead', { enabled: false });
    expect(off.statusCode, off.body).toBe(200);
    expect((await patch(account, id, { name: 'paused' })).statusCode).toBe(200);
    expect((await configure(account, distribute)).statusCode).toBe(201);
  });
});
