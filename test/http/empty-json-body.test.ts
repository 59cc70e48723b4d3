import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { asPerson, personWithRole } from '../people/support.ts';

const JSON_TYPE = { 'content-type': 'application/json' };
const MISSING = '00000000-0000-4000-8000-000000000000';

/**
 * Many clients label every request `Content-Type: application/json`, with a body or not: a route
 * that takes no body reads an empty one as none (docs/decisions.md, HTTP conventions).
 */
describe.each(TEST_DATABASES)('an empty body labelled JSON on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await t.createAccount({ modules: ['distribution'] });
  });
  afterAll(async () => t?.close());

  const empty = (method: 'POST' | 'DELETE', url: string) =>
    t.request({ method, url, key: account.apiKey, headers: JSON_TYPE, payload: '' });

  it('is no body on routes that take none', async () => {
    const webhook = await t.request({
      method: 'POST',
      url: '/api/v1/settings/webhooks',
      key: account.apiKey,
      body: { url: 'http://127.0.0.1:9/h', events: ['*'] },
    });
    const id = webhook.json().id;
    const tested = await empty('POST', `/api/v1/settings/webhooks/${id}/test`);
    expect(tested.statusCode, tested.body).toBe(200);
    expect(tested.json().delivered).toBe(false);
    expect((await empty('DELETE', `/api/v1/settings/webhooks/${id}`)).statusCode).toBe(204);
    // The route's own answers, not a 400 about the body.
    expect((await empty('POST', `/api/v1/settings/webhooks/${MISSING}/test`)).statusCode).toBe(404);
    expect((await empty('DELETE', `/api/v1/settings/webhooks/${MISSING}`)).statusCode).toBe(404);
    const participation = await empty('POST', `/api/v1/distribution/participations/${MISSING}/test`);
    expect([participation.statusCode, participation.json().error]).toEqual([404, 'not_found']);

    const person = await personWithRole(t, account, 'owner');
    const signedOut = await asPerson(t, person, {
      method: 'DELETE',
      url: '/api/v1/session',
      headers: JSON_TYPE,
      payload: '',
    });
    expect(signedOut.statusCode, signedOut.body).toBe(204);
    expect((await asPerson(t, person, { method: 'GET', url: '/api/v1/session' })).statusCode).toBe(401);
  });

  it('stays 400 invalid_body on routes that take one, and a broken body stays 400 everywhere', async () => {
    // A required body, and one whose keys are all optional (decided: an empty JSON body there
    // claims JSON and holds none).
    for (const url of ['/api/v1/settings/webhooks', `/api/v1/distribution/deliveries/${MISSING}/return`]) {
      const answer = await empty('POST', url);
      expect([url, answer.statusCode, answer.json()]).toEqual([url, 400, { error: 'invalid_body' }]);
    }
    const broken = await t.request({
      method: 'DELETE',
      url: `/api/v1/settings/webhooks/${MISSING}`,
      key: account.apiKey,
      headers: JSON_TYPE,
      payload: '{bad',
    });
    expect([broken.statusCode, broken.json()]).toEqual([400, { error: 'invalid_body' }]);
  });

  it('refuses a body with anything in it on every route that takes none, before acting', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    const everything = await t.createAccount({ modules: ['crm', 'distribution', 'booking'] });
    const checked: string[] = [];
    for (const [path, operations] of Object.entries(doc.paths as Record<string, any>)) {
      if (!path.startsWith('/api/v1/') || path.startsWith('/api/v1/in/')) continue;
      for (const [method, operation] of Object.entries(operations as Record<string, any>)) {
        if (!['post', 'put', 'patch', 'delete'].includes(method) || operation.requestBody) continue;
        const url = path.replace(/\{[^}]+\}/g, MISSING);
        const label = `${method.toUpperCase()} ${path}`;
        const send = (body: unknown) =>
          t.request({ method: method.toUpperCase() as 'POST', url, key: everything.apiKey, body });
        const withKeys = await send({ address: 'http://127.0.0.1:9/elsewhere' });
        // The session's DELETE takes a person's session: the key is refused first.
        if (withKeys.statusCode === 401) continue;
        expect([label, withKeys.statusCode], withKeys.body).toEqual([label, 422]);
        expect(withKeys.json().details, label).toEqual([
          { key: 'address', reason: 'unknown_key', message: 'this request takes no body' },
        ]);
        expect((await send([1])).json().details, label).toEqual([
          { key: 'body', reason: 'invalid_type', message: 'this request takes no body' },
        ]);
        // `{}` is no body: the route's own answer.
        expect([label, (await send({})).statusCode]).toEqual([label, 404]);
        checked.push(label);
      }
    }
    expect(checked).toEqual(
      expect.arrayContaining([
        'POST /api/v1/settings/webhooks/{id}/test',
        'POST /api/v1/distribution/participations/{id}/test',
        'DELETE /api/v1/settings/webhooks/{id}',
        'POST /api/v1/documents/{id}/signed-url',
        'POST /api/v1/settings/sources/{id}/token',
      ]),
    );
  });
});
