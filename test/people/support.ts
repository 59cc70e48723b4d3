import { expect } from 'vitest';
import type { Request, TestAccount, TestApp } from '../helpers/app.ts';

export const PASSWORD = 'correct horse battery';

/** A signed-in person: the cookie's value and the CSRF token. */
export interface Session {
  cookie: string;
  csrf: string;
  userId: string;
}

/** The value of `leads_session` in a Set-Cookie header. */
export function cookieValue(setCookie: string | string[] | undefined): string {
  const header = Array.isArray(setCookie) ? setCookie.join('\n') : (setCookie ?? '');
  const match = /leads_session=([^;]*)/.exec(header);
  if (!match) throw new Error(`no session cookie in ${header}`);
  return match[1]!;
}

/** A request carried by the session cookie, with its CSRF token unless told otherwise. */
export function asPerson(t: TestApp, session: Session, request: Request, csrf: string | null = session.csrf) {
  const headers: Record<string, string> = { cookie: `leads_session=${session.cookie}`, ...request.headers };
  if (csrf !== null) headers['x-csrf-token'] = csrf;
  return t.request({ ...request, headers });
}

/** Opens a sign-in link as a browser does (a page outside the API document). */
export function openLink(t: TestApp, token: string, headers: Record<string, string> = {}) {
  return t.app.inject({
    method: 'GET',
    url: `/sign-in/${token}`,
    headers: { accept: 'text/html', ...headers },
  });
}

/** Adds a user through the settings API (an API key with `settings`). */
export async function addUser(
  t: TestApp,
  account: TestAccount,
  user: { email: string; name?: string; role?: string },
): Promise<string> {
  const response = await t.request({
    method: 'POST',
    url: '/api/v1/settings/users',
    key: account.apiKey,
    body: { name: user.name ?? user.email.split('@')[0], ...user },
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json().id;
}

/** A person who can sign in: a user added with its role, given the test password. */
export async function addPersonWithPassword(
  t: TestApp,
  account: TestAccount,
  user: { email: string; name?: string; role?: string },
): Promise<string> {
  const id = await addUser(t, account, user);
  await setPassword(t, account.id, id);
  return id;
}

/** Sets a person's password with a fresh sign-in token, as a reset link would. */
export async function setPassword(t: TestApp, accountId: string, userId: string, password = PASSWORD) {
  const token = await t.services.sessions.issueLink(accountId, userId, 60_000);
  const response = await t.request({
    method: 'POST',
    url: '/api/v1/session/password',
    body: { token, password },
  });
  expect(response.statusCode, response.body).toBe(204);
}

export async function signIn(
  t: TestApp,
  email: string,
  password = PASSWORD,
  extra: { remoteAddress?: string; account_id?: string } = {},
): Promise<Session> {
  const body: Record<string, string> = { email, password };
  if (extra.account_id) body.account_id = extra.account_id;
  const response = await t.request({
    method: 'POST',
    url: '/api/v1/session',
    body,
    remoteAddress: extra.remoteAddress,
  });
  expect(response.statusCode, response.body).toBe(200);
  return {
    cookie: cookieValue(response.headers['set-cookie']),
    csrf: response.json().csrf_token,
    userId: response.json().user.id,
  };
}

/** A person of the account with a role and a password, signed in. */
export async function personWithRole(t: TestApp, account: TestAccount, role: string, email?: string) {
  const address = email ?? `${role}-${Math.random().toString(36).slice(2, 8)}@people.test`;
  const userId = await addUser(t, account, { email: address, role });
  await setPassword(t, account.id, userId);
  return signIn(t, address);
}
