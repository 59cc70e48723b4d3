import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDemoOnce } from '../../src/start/bootstrap.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import {
  addUser,
  asPerson,
  cookieValue,
  openLink,
  PASSWORD,
  personWithRole,
  setPassword,
  signIn,
} from './support.ts';

describe.each(TEST_DATABASES)('sessions on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind, { signInLinkTtlMs: 1_000 });
  });
  afterAll(async () => t?.close());

  describe('happy path', () => {
    it('signs in with a password, reads the session, signs out', async () => {
      const account = await t.createAccount();
      const userId = await addUser(t, account, { email: 'Ada@Example.com', name: 'Ada' });
      await setPassword(t, account.id, userId);

      const response = await t.request({
        method: 'POST',
        url: '/api/v1/session',
        body: { email: 'ada@example.com', password: PASSWORD },
      });
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(body).toEqual({
        user: {
          id: userId,
          email: 'Ada@Example.com',
          name: 'Ada',
          role: 'owner',
          account_id: account.id,
          has_password: true,
        },
        csrf_token: expect.any(String),
      });
      const setCookie = String(response.headers['set-cookie']);
      expect(setCookie).toMatch(/^leads_session=ls_[0-9A-Za-z]+; HttpOnly; SameSite=Lax; Path=\//);
      expect(setCookie).not.toContain('Secure');
      const session = { cookie: cookieValue(setCookie), csrf: body.csrf_token, userId };

      const read = await asPerson(t, session, { method: 'GET', url: '/api/v1/session' }, null);
      expect(read.statusCode).toBe(200);
      expect(read.json()).toEqual(body);

      const out = await asPerson(t, session, { method: 'DELETE', url: '/api/v1/session' });
      expect(out.statusCode).toBe(204);
      expect(String(out.headers['set-cookie'])).toContain('Max-Age=0');
      const after = await asPerson(t, session, { method: 'GET', url: '/api/v1/session' }, null);
      expect(after.statusCode).toBe(401);
      expect(after.json().error).toBe('unauthorized');
    });

    it('lets the demo owner set a password with the first start’s token, once', async () => {
      const demo = await createDemoOnce(t.db, t.services);
      expect(demo?.signInToken).toMatch(/^sl_/);
      const set = await t.request({
        method: 'POST',
        url: '/api/v1/session/password',
        body: { token: demo!.signInToken, password: 'a new demo password' },
      });
      expect(set.statusCode).toBe(204);
      const session = await signIn(t, 'owner@example.com', 'a new demo password');
      const read = await asPerson(t, session, { method: 'GET', url: '/api/v1/session' }, null);
      expect(read.json().user).toMatchObject({
        role: 'owner',
        account_id: demo!.accountId,
        has_password: true,
      });
      // The demo's key reaches the same account as the owner's session.
      const records = await asPerson(t, session, { method: 'GET', url: '/api/v1/entities' });
      expect(records.statusCode).toBe(200);

      const again = await t.request({
        method: 'POST',
        url: '/api/v1/session/password',
        body: { token: demo!.signInToken, password: 'another password' },
      });
      expect(again.statusCode).toBe(401);
      expect(again.json().error).toBe('invalid_credentials');
    });

    it('opens a link in the browser: cookie, 303 to the console, then a password without the current one', async () => {
      const account = await t.createAccount();
      const userId = await addUser(t, account, { email: 'linked@people.test' });
      const token = await t.services.sessions.issueLink(account.id, userId, 60_000);
      const opened = await openLink(t, token);
      expect(opened.statusCode).toBe(303);
      expect(opened.headers.location).toBe('/');
      const cookie = cookieValue(opened.headers['set-cookie']);
      const read = await t.request({
        method: 'GET',
        url: '/api/v1/session',
        headers: { cookie: `leads_session=${cookie}` },
      });
      expect(read.json().user).toMatchObject({ id: userId, has_password: false });
      const session = { cookie, csrf: read.json().csrf_token, userId };
      const set = await asPerson(t, session, {
        method: 'POST',
        url: '/api/v1/session/password',
        body: { password: 'my first password' },
      });
      expect(set.statusCode).toBe(204);
      // The session that set it goes on; the password now signs in.
      expect((await asPerson(t, session, { method: 'GET', url: '/api/v1/session' })).statusCode).toBe(200);
      await signIn(t, 'linked@people.test', 'my first password');
    });

    it('changes a password with the current one, ending the person’s other sessions', async () => {
      const account = await t.createAccount();
      await addUser(t, account, { email: 'first@people.test' });
      const one = await personWithRole(t, account, 'member', 'changer@people.test');
      const two = await signIn(t, 'changer@people.test');
      const changed = await asPerson(t, one, {
        method: 'POST',
        url: '/api/v1/session/password',
        body: { current_password: PASSWORD, password: 'a changed password' },
      });
      expect(changed.statusCode).toBe(204);
      expect((await asPerson(t, one, { method: 'GET', url: '/api/v1/session' })).statusCode).toBe(200);
      expect((await asPerson(t, two, { method: 'GET', url: '/api/v1/session' })).statusCode).toBe(401);
      await signIn(t, 'changer@people.test', 'a changed password');
    });

    it('signs in to the account whose password matches when an email is a user of two', async () => {
      const a = await t.createAccount({ name: 'A' });
      const b = await t.createAccount({ name: 'B' });
      const inA = await addUser(t, a, { email: 'twice@people.test' });
      const inB = await addUser(t, b, { email: 'twice@people.test' });
      await setPassword(t, a.id, inA, 'password of account a');
      await setPassword(t, b.id, inB, 'password of account b');
      expect((await signIn(t, 'twice@people.test', 'password of account b')).userId).toBe(inB);
      expect((await signIn(t, 'twice@people.test', 'password of account a')).userId).toBe(inA);
      const chosen = await t.request({
        method: 'POST',
        url: '/api/v1/session',
        body: { email: 'twice@people.test', password: 'password of account a', account_id: b.id },
      });
      expect(chosen.statusCode).toBe(401);
    });

    it('names the signed-in person in the history of what they did', async () => {
      const account = await accountWithLeads(t);
      const member = await personWithRole(t, account, 'member', 'historian@people.test');
      const created = await asPerson(t, member, {
        method: 'POST',
        url: '/api/v1/records',
        body: { entity: 'lead', fields: { email: 'lead@example.com' } },
      });
      expect(created.statusCode).toBe(201);
      const id = created.json().id;
      const note = await asPerson(t, member, {
        method: 'POST',
        url: '/api/v1/notes',
        body: { record: id, body: 'Called back' },
      });
      expect(note.statusCode).toBe(201);
      const changed = await asPerson(t, member, {
        method: 'PATCH',
        url: `/api/v1/records/${id}`,
        body: { fields: { first_name: 'Lea' } },
      });
      expect(changed.statusCode).toBe(200);
      const history = await t.request({
        method: 'GET',
        url: `/api/v1/records/${id}/history`,
        key: account.apiKey,
      });
      const actors = (history.json().events as { type: string; actor: { type: string; name: string } }[]).map(
        (event) => [event.type, event.actor.type, event.actor.name],
      );
      expect(actors).toContainEqual(['note_added', 'user', 'historian@people.test']);
      expect(actors).toContainEqual(['lead_updated', 'user', 'historian@people.test']);
    });
  });

  describe('errors', () => {
    it('answers unknown email and wrong password the same 401', async () => {
      const account = await t.createAccount();
      const userId = await addUser(t, account, { email: 'known@people.test' });
      await setPassword(t, account.id, userId);
      const wrong = await t.request({
        method: 'POST',
        url: '/api/v1/session',
        body: { email: 'known@people.test', password: 'not the password' },
        remoteAddress: '10.0.0.1',
      });
      const unknown = await t.request({
        method: 'POST',
        url: '/api/v1/session',
        body: { email: 'nobody@people.test', password: 'not the password' },
        remoteAddress: '10.0.0.1',
      });
      expect(wrong.statusCode).toBe(401);
      expect(unknown.statusCode).toBe(401);
      expect(wrong.json()).toEqual(unknown.json());
      expect(wrong.json().error).toBe('invalid_credentials');
      expect(wrong.headers['set-cookie']).toBeUndefined();
    });

    it('refuses a password under 10 characters and a body without credentials', async () => {
      const account = await t.createAccount();
      const userId = await addUser(t, account, { email: 'short@people.test' });
      const token = await t.services.sessions.issueLink(account.id, userId, 60_000);
      const short = await t.request({
        method: 'POST',
        url: '/api/v1/session/password',
        body: { token, password: 'too short' },
      });
      expect(short.statusCode).toBe(422);
      expect(short.json().details[0].key).toBe('password');
      const long = await t.request({
        method: 'POST',
        url: '/api/v1/session/password',
        body: { token, password: 'x'.repeat(257) },
      });
      expect(long.statusCode).toBe(422);
      // The refused attempts did not use the token up.
      const fine = await t.request({
        method: 'POST',
        url: '/api/v1/session/password',
        body: { token, password: 'long enough now' },
      });
      expect(fine.statusCode).toBe(204);
      const empty = await t.request({ method: 'POST', url: '/api/v1/session', body: {} });
      expect(empty.statusCode).toBe(422);
    });

    it('refuses a sign-in that names both ways in, and names what a half-given one lacks', async () => {
      const account = await t.createAccount();
      const userId = await addUser(t, account, { email: 'both@people.test' });
      await setPassword(t, account.id, userId);
      const token = await t.services.sessions.issueLink(account.id, userId, 60_000);
      const signInWith = (body: object) =>
        t.request({ method: 'POST', url: '/api/v1/session', body, remoteAddress: '10.0.0.7' });
      const both = await signInWith({ email: 'both@people.test', password: PASSWORD, token });
      expect(both.statusCode).toBe(422);
      expect(both.json().details).toEqual([
        { key: 'email', reason: 'not_allowed', message: 'give email and password, or token: not both' },
        { key: 'password', reason: 'not_allowed', message: 'give email and password, or token: not both' },
      ]);
      expect(both.headers['set-cookie']).toBeUndefined();
      // A wrong password beside a good token, which was answered 200 by the token alone.
      const wrongPassword = await signInWith({ email: 'both@people.test', password: 'not it at all', token });
      expect(wrongPassword.statusCode).toBe(422);
      const withAccount = await signInWith({ token, account_id: account.id });
      expect(withAccount.statusCode).toBe(422);
      expect(withAccount.json().details).toEqual([
        { key: 'account_id', reason: 'not_allowed', message: 'a sign-in link’s token names its account' },
      ]);
      const noPassword = await signInWith({ email: 'both@people.test' });
      expect(noPassword.statusCode).toBe(422);
      expect(noPassword.json().details).toMatchObject([{ key: 'password', reason: 'required' }]);
      const noEmail = await signInWith({ password: PASSWORD });
      expect(noEmail.json().details).toMatchObject([{ key: 'email', reason: 'required' }]);
      // None of them used the token up, nor counted as a failed sign-in.
      expect((await signInWith({ token })).statusCode).toBe(200);
      expect((await signInWith({ email: 'both@people.test', password: PASSWORD })).statusCode).toBe(200);
    });

    it('shows the page of an unusable link for any address below /sign-in/, however long or odd', async () => {
      for (const path of [
        `sl_${'x'.repeat(120)}`,
        `sl_${'x'.repeat(300)}`,
        'x'.repeat(2000),
        'sl_abc/more',
        'sl_abc%00',
        'sl_abc%E0',
        'sl_%zz',
      ]) {
        const page = await t.app.inject({
          method: 'GET',
          url: `/sign-in/${path}`,
          headers: { accept: 'text/html', 'accept-language': 'de' },
          remoteAddress: '10.0.0.8',
        });
        expect([path.slice(0, 20), page.statusCode, page.headers['content-type']]).toEqual([
          path.slice(0, 20),
          410,
          'text/html; charset=utf-8',
        ]);
        expect(page.body).toContain('Anmeldelink');
        expect(page.headers['content-security-policy']).toContain("default-src 'none'");
        const head = await t.app.inject({
          method: 'HEAD',
          url: `/sign-in/${path}`,
          remoteAddress: '10.0.0.8',
        });
        expect([path.slice(0, 20), head.statusCode, head.body]).toEqual([path.slice(0, 20), 200, '']);
      }
    });

    it('asks for the current password to change one that is set', async () => {
      const account = await t.createAccount();
      const session = await personWithRole(t, account, 'owner', 'current@people.test');
      const bare = await asPerson(t, session, {
        method: 'POST',
        url: '/api/v1/session/password',
        body: { password: 'a brand new password' },
      });
      expect(bare.statusCode).toBe(422);
      expect(bare.json().details[0].key).toBe('current_password');
      const wrong = await asPerson(t, session, {
        method: 'POST',
        url: '/api/v1/session/password',
        body: { current_password: 'not it at all', password: 'a brand new password' },
      });
      expect(wrong.statusCode).toBe(401);
      expect(wrong.json().error).toBe('invalid_credentials');
      const signedOut = await t.request({
        method: 'POST',
        url: '/api/v1/session/password',
        body: { current_password: PASSWORD, password: 'a brand new password' },
      });
      expect(signedOut.statusCode).toBe(401);
    });

    it('refuses an expired link and a used one, with a page in the browser’s language', async () => {
      const account = await t.createAccount();
      const userId = await addUser(t, account, { email: 'late@people.test' });
      const expiring = await t.services.sessions.issueLink(account.id, userId, 1_000);
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      const expired = await t.request({ method: 'POST', url: '/api/v1/session', body: { token: expiring } });
      expect(expired.statusCode).toBe(401);
      expect(expired.json().error).toBe('invalid_credentials');
      const page = await openLink(t, expiring, { 'accept-language': 'de-DE,de;q=0.9' });
      expect(page.statusCode).toBe(410);
      expect(page.headers['content-type']).toContain('text/html');
      expect(page.headers['set-cookie']).toBeUndefined();
      expect(page.body).toContain('<html lang="de">');
      expect(page.body).toContain('Anmeldelink');

      const token = await t.services.sessions.issueLink(account.id, userId, 60_000);
      const first = await t.request({ method: 'POST', url: '/api/v1/session', body: { token } });
      expect(first.statusCode).toBe(200);
      const used = await openLink(t, token);
      expect(used.statusCode).toBe(410);
      expect(used.body).toContain('<html lang="en">');
      expect(used.body).toContain('This sign-in link cannot be used');
      // A HEAD (a link checker) never uses a link up.
      const fresh = await t.services.sessions.issueLink(account.id, userId, 60_000);
      const head = await t.app.inject({ method: 'HEAD', url: `/sign-in/${fresh}` });
      // It finds a page (a checker must not call the link broken), with no body.
      expect(head.statusCode).toBe(200);
      expect(head.headers['content-type']).toMatch(/^text\/html/);
      expect(head.body).toBe('');
      expect(
        (await t.request({ method: 'POST', url: '/api/v1/session', body: { token: fresh } })).statusCode,
      ).toBe(200);
    });

    it('answers 429 with Retry-After after 10 failures for one email, and from one address', async () => {
      const account = await t.createAccount();
      const userId = await addUser(t, account, { email: 'target@people.test' });
      await setPassword(t, account.id, userId);
      for (let i = 0; i < 10; i++) {
        const failed = await t.request({
          method: 'POST',
          url: '/api/v1/session',
          body: { email: 'target@people.test', password: `guess number ${i}` },
          // Each from another address: the email's count is what stops them.
          remoteAddress: `10.1.0.${i + 1}`,
        });
        expect(failed.statusCode).toBe(401);
      }
      const limited = await t.request({
        method: 'POST',
        url: '/api/v1/session',
        body: { email: 'target@people.test', password: PASSWORD },
        remoteAddress: '10.1.1.1',
      });
      expect(limited.statusCode).toBe(429);
      expect(limited.json().error).toBe('rate_limited');
      const retryAfter = Number(limited.headers['retry-after']);
      expect(retryAfter).toBeGreaterThan(800);
      expect(retryAfter).toBeLessThanOrEqual(900);

      for (let i = 0; i < 10; i++) {
        const failed = await t.request({
          method: 'POST',
          url: '/api/v1/session',
          body: { email: `someone-${i}@people.test`, password: 'a guessed password' },
          remoteAddress: '10.2.0.1',
        });
        expect(failed.statusCode).toBe(401);
      }
      const fromAddress = await t.request({
        method: 'POST',
        url: '/api/v1/session',
        body: { email: 'another@people.test', password: 'a guessed password' },
        remoteAddress: '10.2.0.1',
      });
      expect(fromAddress.statusCode).toBe(429);
      expect(Number(fromAddress.headers['retry-after'])).toBeGreaterThan(0);
      // Another address and another email are not held up.
      const other = await t.request({
        method: 'POST',
        url: '/api/v1/session',
        body: { email: 'another@people.test', password: 'a guessed password' },
        remoteAddress: '10.2.0.2',
      });
      expect(other.statusCode).toBe(401);
    });
  });

  describe('security', () => {
    it('sets Secure on the cookie when PUBLIC_URL is https', async () => {
      const secure = await startTestApp(kind, { publicUrl: () => 'https://leads.example.com' });
      try {
        const account = await secure.createAccount();
        const userId = await addUser(secure, account, { email: 'secure@people.test' });
        await setPassword(secure, account.id, userId);
        const response = await secure.request({
          method: 'POST',
          url: '/api/v1/session',
          body: { email: 'secure@people.test', password: PASSWORD },
        });
        expect(String(response.headers['set-cookie'])).toMatch(
          /^leads_session=ls_\w+; HttpOnly; SameSite=Lax; Path=\/; Max-Age=\d+; Secure$/,
        );
      } finally {
        await secure.close();
      }
    });

    it('refuses a session whose user was removed, renamed or given another role, at once', async () => {
      const account = await t.createAccount();
      const owner = await personWithRole(t, account, 'owner', 'boss@people.test');
      const removed = await personWithRole(t, account, 'member', 'leaving@people.test');
      const changed = await personWithRole(t, account, 'member', 'promoted@people.test');
      const deleted = await asPerson(t, owner, {
        method: 'DELETE',
        url: `/api/v1/settings/users/${removed.userId}`,
      });
      expect(deleted.statusCode).toBe(204);
      expect((await asPerson(t, removed, { method: 'GET', url: '/api/v1/session' })).statusCode).toBe(401);
      const patched = await asPerson(t, owner, {
        method: 'PATCH',
        url: `/api/v1/settings/users/${changed.userId}`,
        body: { role: 'admin' },
      });
      expect(patched.statusCode).toBe(200);
      expect(patched.json().role).toBe('admin');
      expect((await asPerson(t, changed, { method: 'GET', url: '/api/v1/session' })).statusCode).toBe(401);
      const again = await signIn(t, 'promoted@people.test');
      const read = await asPerson(t, again, { method: 'GET', url: '/api/v1/session' });
      expect(read.json().user.role).toBe('admin');
      // A new name alone ends the sessions too; the next sign-in reads it.
      const renamed = await asPerson(t, owner, {
        method: 'PATCH',
        url: `/api/v1/settings/users/${changed.userId}`,
        body: { name: 'Promoted Person' },
      });
      expect(renamed.statusCode).toBe(200);
      expect((await asPerson(t, again, { method: 'GET', url: '/api/v1/session' })).statusCode).toBe(401);
      const third = await signIn(t, 'promoted@people.test');
      expect((await asPerson(t, third, { method: 'GET', url: '/api/v1/session' })).json().user.name).toBe(
        'Promoted Person',
      );
      // The owner's own sessions are untouched by changes to someone else.
      expect((await asPerson(t, owner, { method: 'GET', url: '/api/v1/session' })).statusCode).toBe(200);
    });

    it('never signs in with a cookie it did not issue, nor reads a session with an API key', async () => {
      const account = await t.createAccount();
      const forged = await t.request({
        method: 'GET',
        url: '/api/v1/session',
        headers: { cookie: 'leads_session=ls_000000000000000000000000000000000' },
      });
      expect(forged.statusCode).toBe(401);
      const withKey = await t.request({ method: 'GET', url: '/api/v1/session', key: account.apiKey });
      expect(withKey.statusCode).toBe(401);
    });
  });
});
