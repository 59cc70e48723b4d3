import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Request, TestAccount, TestApp } from '../helpers/app.ts';
import { startTestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { addUser, asPerson, personWithRole, type Session, setPassword, signIn } from './support.ts';

const ROLES = ['viewer', 'member', 'admin', 'owner'] as const;
type Role = (typeof ROLES)[number];

describe.each(TEST_DATABASES)('roles and sessions as credentials on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let recordId: string;
  const people = {} as Record<Role, Session>;

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t, { modules: ['crm', 'distribution'] });
    // The first user is the owner; the others get the role asked for.
    people.owner = await personWithRole(t, account, 'owner', 'owner@roles.test');
    for (const role of ['viewer', 'member', 'admin'] as const) {
      people[role] = await personWithRole(t, account, role, `${role}@roles.test`);
    }
    const created = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields: { email: 'matrix@example.com' } },
    });
    recordId = created.json().id;
  });
  afterAll(async () => t?.close());

  describe('happy path', () => {
    it('lets every role sign itself out (the console’s Sign out), ending the session on the server', async () => {
      for (const role of ['viewer', 'member', 'admin'] as const) {
        const session = await personWithRole(t, account, role);
        const out = await asPerson(t, session, { method: 'DELETE', url: '/api/v1/session' });
        expect(out.statusCode, `${role}: ${out.body}`).toBe(204);
        const after = await asPerson(t, session, { method: 'GET', url: '/api/v1/session' });
        expect(after.statusCode, role).toBe(401);
      }
    });

    it('gives the account’s first user the owner role and later ones member by default', async () => {
      const fresh = await t.createAccount();
      const first = await t.request({
        method: 'POST',
        url: '/api/v1/settings/users',
        key: fresh.apiKey,
        body: { email: 'first@roles.test', name: 'First', role: 'viewer' },
      });
      expect(first.json()).toMatchObject({ role: 'owner' });
      const second = await t.request({
        method: 'POST',
        url: '/api/v1/settings/users',
        key: fresh.apiKey,
        body: { email: 'second@roles.test', name: 'Second' },
      });
      expect(second.json()).toMatchObject({ role: 'member' });
      const list = await t.request({ method: 'GET', url: '/api/v1/settings/users', key: fresh.apiKey });
      expect(list.json().users.map((u: { role: string }) => u.role)).toEqual(['owner', 'member']);
    });

    it('removes a user from the records they were assignee and viewer of', async () => {
      const leaving = await addUser(t, account, { email: 'assignee@roles.test' });
      // S1 intake names assignees and viewers.
      const created = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: {
          entity: 'lead',
          email: 'assigned@example.com',
          assignee: 'assignee@roles.test',
          viewers: ['assignee@roles.test', 'viewer@roles.test'],
        },
      });
      expect(created.statusCode, created.body).toBe(200);
      const recordId = created.json().lead_id;
      const before = await t.db
        .selectFrom('records')
        .select(['assignee_id', 'viewer_ids'])
        .where('account_id', '=', account.id)
        .where('id', '=', recordId)
        .executeTakeFirstOrThrow();
      expect(before).toEqual({ assignee_id: leaving, viewer_ids: [leaving, people.viewer.userId] });
      const removed = await asPerson(t, people.owner, {
        method: 'DELETE',
        url: `/api/v1/settings/users/${leaving}`,
      });
      expect(removed.statusCode).toBe(204);
      const row = await t.db
        .selectFrom('records')
        .select(['assignee_id', 'viewer_ids'])
        .where('account_id', '=', account.id)
        .where('id', '=', recordId)
        .executeTakeFirstOrThrow();
      expect(row.assignee_id).toBeNull();
      expect(row.viewer_ids).toEqual([people.viewer.userId]);
    });
  });

  describe('errors', () => {
    it('keeps the last owner: no demotion, no removal', async () => {
      const fresh = await t.createAccount();
      const owner = await personWithRole(t, fresh, 'owner', 'only-owner@roles.test');
      const demote = await asPerson(t, owner, {
        method: 'PATCH',
        url: `/api/v1/settings/users/${owner.userId}`,
        body: { role: 'admin' },
      });
      expect(demote.statusCode).toBe(409);
      expect(demote.json().error).toBe('last_owner');
      const remove = await t.request({
        method: 'DELETE',
        url: `/api/v1/settings/users/${owner.userId}`,
        key: fresh.apiKey,
      });
      expect(remove.statusCode).toBe(409);
      expect(remove.json().error).toBe('last_owner');
    });

    it('refuses a user beyond 500 per account, also when several are added at once', async () => {
      const fresh = await t.createAccount();
      await addUser(t, fresh, { email: 'first@cap.test' });
      // 495 more written directly: the bound is what is tested, not 495 calls.
      await t.db
        .insertInto('users')
        .values(
          Array.from({ length: 495 }, (_, i) => ({
            id: randomUUID(),
            account_id: fresh.id,
            email: `u${i}@cap.test`,
            name: `User ${i}`,
            role: 'member' as const,
          })),
        )
        .execute();
      const add = (i: number) =>
        t.request({
          method: 'POST',
          url: '/api/v1/settings/users',
          key: fresh.apiKey,
          body: { email: `late${i}@cap.test`, name: `Late ${i}` },
        });
      const answers = await Promise.all([0, 1, 2, 3, 4, 5, 6].map(add));
      expect(answers.map((r) => r.statusCode).sort()).toEqual([201, 201, 201, 201, 422, 422, 422]);
      expect(answers.find((r) => r.statusCode === 422)!.json()).toEqual({
        error: 'validation_failed',
        details: [{ key: 'email', reason: 'too_many', message: 'at most 500 users per account' }],
      });
      const users = await t.db.selectFrom('users').select('id').where('account_id', '=', fresh.id).execute();
      expect(users).toHaveLength(500);
      // A removal makes room again.
      const removed = await t.request({
        method: 'DELETE',
        url: `/api/v1/settings/users/${answers.find((r) => r.statusCode === 201)!.json().id}`,
        key: fresh.apiKey,
      });
      expect(removed.statusCode).toBe(204);
      expect((await add(9)).statusCode).toBe(201);
    });

    it('lets only one of two owners demoted at once go', async () => {
      const fresh = await t.createAccount();
      const a = await addUser(t, fresh, { email: 'a@owners.test' });
      const b = await addUser(t, fresh, { email: 'b@owners.test', role: 'owner' });
      const answers = await Promise.all(
        [a, b].map((id) =>
          t.request({
            method: 'PATCH',
            url: `/api/v1/settings/users/${id}`,
            key: fresh.apiKey,
            body: { role: 'member' },
          }),
        ),
      );
      expect(answers.map((r) => r.statusCode).sort()).toEqual([200, 409]);
      const [x, y] = await Promise.all(
        [a, b].map((id) =>
          t.request({ method: 'DELETE', url: `/api/v1/settings/users/${id}`, key: fresh.apiKey }),
        ),
      );
      expect([x!.statusCode, y!.statusCode]).toContain(409);
      const owners = await t.db
        .selectFrom('users')
        .select('id')
        .where('account_id', '=', fresh.id)
        .where('role', '=', 'owner')
        .execute();
      expect(owners).toHaveLength(1);
    });
  });

  describe('security', () => {
    /** Each route with the least role that may use it; below it a session gets 403 forbidden. */
    const routes: { least: Role; request: () => Request }[] = [
      { least: 'viewer', request: () => ({ method: 'GET', url: `/api/v1/records/${recordId}` }) },
      { least: 'viewer', request: () => ({ method: 'GET', url: '/api/v1/crm/pipelines' }) },
      { least: 'viewer', request: () => ({ method: 'GET', url: '/api/v1/settings/users' }) },
      {
        least: 'member',
        request: () => ({
          method: 'POST',
          url: '/api/v1/records',
          body: { entity: 'lead', fields: { email: `${randomUUID()}@example.com` } },
        }),
      },
      {
        least: 'member',
        request: () => ({
          method: 'PATCH',
          url: `/api/v1/records/${recordId}`,
          body: { fields: { company: 'X' } },
        }),
      },
      {
        least: 'member',
        request: () => ({ method: 'POST', url: '/api/v1/notes', body: { record: recordId, body: 'n' } }),
      },
      {
        least: 'member',
        request: () => ({
          method: 'POST',
          url: `/api/v1/crm/records/${recordId}/stage`,
          body: { stage: 'Contacted' },
        }),
      },
      {
        least: 'member',
        request: () => ({
          method: 'POST',
          url: `/api/v1/distribution/deliveries/${randomUUID()}/return`,
          body: { reason: 'Wrong number' },
        }),
      },
      // Intake's module nodes need the role of their module's endpoint: a stage placement is a
      // stage move (member), a distribution node starts a run (admin).
      {
        least: 'member',
        request: () => ({
          method: 'POST',
          url: '/api/v1/records',
          body: {
            entity: 'lead',
            fields: { email: `${randomUUID()}@example.com` },
            crm: { stage: 'Contacted' },
          },
        }),
      },
      {
        least: 'admin',
        request: () => ({
          method: 'POST',
          url: '/api/v1/records',
          body: { entity: 'lead', fields: { email: `${randomUUID()}@example.com` }, distribution: {} },
        }),
      },
      { least: 'admin', request: () => ({ method: 'GET', url: '/api/v1/settings/api-keys' }) },
      { least: 'admin', request: () => ({ method: 'GET', url: '/api/v1/settings/entities' }) },
      {
        least: 'admin',
        request: () => ({ method: 'POST', url: '/api/v1/settings/sources', body: { name: randomUUID() } }),
      },
      {
        least: 'admin',
        request: () => ({
          method: 'POST',
          url: '/api/v1/distribution/partners',
          body: { name: randomUUID(), delivery: { type: 'email', to: 'p@example.com' } },
        }),
      },
      {
        least: 'owner',
        request: () => ({
          method: 'POST',
          url: '/api/v1/settings/users',
          body: { email: `${randomUUID()}@roles.test`, name: 'New' },
        }),
      },
      {
        least: 'owner',
        request: () => ({
          method: 'PATCH',
          url: `/api/v1/settings/users/${people.viewer.userId}`,
          body: { name: 'V' },
        }),
      },
    ];

    it('answers each role as an API key with the role’s permissions', async () => {
      const table: string[] = [];
      for (const route of routes) {
        for (const role of ROLES) {
          const request = route.request();
          const response = await asPerson(t, people[role], request);
          const allowed = ROLES.indexOf(role) >= ROLES.indexOf(route.least);
          const label = `${role} ${request.method} ${request.url} → ${response.statusCode} ${response.body.slice(0, 120)}`;
          table.push(label);
          if (allowed) {
            expect(response.statusCode, label).not.toBe(403);
            expect(response.statusCode, label).not.toBe(401);
          } else {
            expect(response.statusCode, label).toBe(403);
            expect(response.json().error, label).toBe('forbidden');
          }
        }
      }
      // The allowed writes did what they say (not only "not refused").
      expect(
        table.some((line) => line.startsWith('member POST /api/v1/records →') && line.includes('→ 201')),
      ).toBe(true);
      expect(table.some((line) => line.includes(`/stage → 200`))).toBe(true);
    });

    it('needs the session’s X-CSRF-Token on state changes, checked before the body is read', async () => {
      const request = {
        method: 'POST' as const,
        url: '/api/v1/notes',
        body: { record: recordId, body: 'csrf' },
      };
      const missing = await asPerson(t, people.member, request, null);
      expect(missing.statusCode).toBe(403);
      expect(missing.json().error).toBe('csrf_failed');
      const wrong = await asPerson(t, people.member, request, people.owner.csrf);
      expect(wrong.statusCode).toBe(403);
      expect(wrong.json().error).toBe('csrf_failed');
      const broken = await asPerson(
        t,
        people.member,
        {
          method: 'POST',
          url: '/api/v1/records',
          payload: '{not json',
          headers: { 'content-type': 'application/json' },
        },
        null,
      );
      expect(broken.json().error).toBe('csrf_failed');
      const signOut = await asPerson(t, people.member, { method: 'DELETE', url: '/api/v1/session' }, null);
      expect(signOut.json().error).toBe('csrf_failed');
      // Setting a password by the cookie alone: the token first, before the body's schema.
      const password = await asPerson(
        t,
        people.member,
        { method: 'POST', url: '/api/v1/session/password', body: { password: 'short' } },
        null,
      );
      expect(password.statusCode).toBe(403);
      expect(password.json().error).toBe('csrf_failed');
      const checked = await asPerson(t, people.member, {
        method: 'POST',
        url: '/api/v1/session/password',
        body: { password: 'short' },
      });
      expect(checked.statusCode).toBe(422);
      // Reads need none; an API key never needs one, even with a cookie beside it.
      expect(
        (await asPerson(t, people.member, { method: 'GET', url: `/api/v1/records/${recordId}` }, null))
          .statusCode,
      ).toBe(200);
      const withKey = await t.request({
        ...request,
        key: account.apiKey,
        headers: { cookie: `leads_session=${people.viewer.cookie}` },
      });
      expect(withKey.statusCode).toBe(201);
    });

    it('shows another account’s records to nobody: 404', async () => {
      const other = await accountWithLeads(t);
      const theirs = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: other.apiKey,
        body: { entity: 'lead', fields: { email: 'theirs@example.com' } },
      });
      const id = theirs.json().id;
      const read = await asPerson(t, people.owner, { method: 'GET', url: `/api/v1/records/${id}` });
      expect(read.statusCode).toBe(404);
      const write = await asPerson(t, people.owner, {
        method: 'PATCH',
        url: `/api/v1/records/${id}`,
        body: { fields: { company: 'Mine now' } },
      });
      expect(write.statusCode).toBe(404);
      const user = await asPerson(t, people.owner, {
        method: 'DELETE',
        url: `/api/v1/settings/users/${(await t.request({ method: 'GET', url: '/api/v1/settings/users', key: other.apiKey })).json().users[0]?.id ?? randomUUID()}`,
      });
      expect(user.statusCode).toBe(404);
    });

    it('lets no admin become owner through a key: a key an admin makes may not manage users', async () => {
      const fresh = await t.createAccount();
      const owner = await personWithRole(t, fresh, 'owner', `${randomUUID()}@roles.test`);
      const admin = await personWithRole(t, fresh, 'admin', `${randomUUID()}@roles.test`);
      const keyBy = async (credential: { session?: Session; key?: string }) => {
        const request: Request = {
          method: 'POST',
          url: '/api/v1/settings/api-keys',
          body: { name: randomUUID() },
        };
        const made = credential.session
          ? await asPerson(t, credential.session, request)
          : await t.request({ ...request, key: credential.key });
        expect(made.statusCode, made.body).toBe(201);
        return made.json() as { key: string; manages_users: boolean; permissions: string[] };
      };
      const promote = (key: string) =>
        t.request({
          method: 'PATCH',
          url: `/api/v1/settings/users/${admin.userId}`,
          key,
          body: { role: 'owner' },
        });
      const adminsKey = await keyBy({ session: admin });
      expect(adminsKey.permissions).toContain('settings');
      expect(adminsKey.manages_users).toBe(false);
      const refused = await promote(adminsKey.key);
      expect(refused.statusCode).toBe(403);
      expect(refused.json().error).toBe('forbidden');
      const adding = await t.request({
        method: 'POST',
        url: '/api/v1/settings/users',
        key: adminsKey.key,
        body: { email: `${randomUUID()}@roles.test`, name: 'Sneaky', role: 'owner' },
      });
      expect(adding.statusCode).toBe(403);
      // Nor through a key that key makes; the rest of the settings API stays open to it.
      const second = await keyBy({ key: adminsKey.key });
      expect(second.manages_users).toBe(false);
      expect((await promote(second.key)).statusCode).toBe(403);
      expect(
        (await t.request({ method: 'GET', url: '/api/v1/settings/users', key: second.key })).statusCode,
      ).toBe(200);
      // The operator's first key, an owner's key and a key one of those makes may.
      expect((await keyBy({ key: fresh.apiKey })).manages_users).toBe(true);
      const ownersKey = await keyBy({ session: owner });
      expect(ownersKey.manages_users).toBe(true);
      const listed = await t.request({
        method: 'GET',
        url: '/api/v1/settings/api-keys?limit=100',
        key: fresh.apiKey,
      });
      expect(
        listed
          .json()
          .api_keys.map((key: { manages_users: boolean }) => key.manages_users)
          .sort(),
      ).toEqual([false, false, true, true, true]);
      const promoted = await promote(ownersKey.key);
      expect(promoted.statusCode).toBe(200);
      expect(promoted.json().role).toBe('owner');
    });

    it('refuses the module of an account that has not booked it, as for keys', async () => {
      const plain = await accountWithLeads(t, { modules: [] });
      const userId = await addUser(t, plain, { email: 'plain@roles.test' });
      await setPassword(t, plain.id, userId);
      const session = await signIn(t, 'plain@roles.test');
      const response = await asPerson(t, session, { method: 'GET', url: '/api/v1/crm/pipelines' });
      expect(response.statusCode).toBe(403);
      expect(response.json().error).toBe('module_not_enabled');
    });
  });
});
