import type { Db, Executor } from '../../db/types.ts';
import type { Credential, Role } from '../../http/auth.ts';
import { AppError } from '../../http/errors.ts';
import { generateToken, hashSecret } from '../../lib/credentials.ts';
import type { OutboundService } from '../../outbound/outbound.service.ts';
import { csrfTokenOf, SESSION_ABSOLUTE_MS, SESSION_IDLE_MS } from '../auth/auth.service.ts';
import { hashPassword, verifyPassword } from './passwords.ts';
import type { SessionsRepo } from './sessions.repo.ts';
import { invitationEmail, type Language, signInEmail } from './sign-in.texts.ts';

type SessionCredential = Extract<Credential, { kind: 'session' }>;

/** More than this many failed sign-ins for one email or from one address … */
export const MAX_FAILURES = 10;
/** … within this window answer 429 (decisions §14). */
export const FAILURE_WINDOW_MS = 15 * 60_000;
/** Sign-in links sent to one email address, and asked for from one address, in the window. */
const MAX_LINKS_PER_EMAIL = 5;
const MAX_LINKS_PER_ADDRESS = 20;
/** Accounts one email address is tried in (an email may be a user of several accounts). */
const MAX_ACCOUNTS_PER_EMAIL = 10;
/** The first-start link waits a week for the demo's owner (docs/decisions.md). */
export const FIRST_START_LINK_TTL_MS = 7 * 86_400_000;

/** An invitation's link (POST /api/v1/settings/users with `invite`) waits as long as the first start's. */
const INVITATION_TTL_MS = FIRST_START_LINK_TTL_MS;

export interface SessionView {
  user: { id: string; email: string; name: string; role: Role; account_id: string; has_password: boolean };
  csrf_token: string;
}

export interface StartedSession {
  /** The cookie's value. */
  token: string;
  view: SessionView;
}

export interface SessionsServiceDeps {
  db: Db;
  repo: SessionsRepo;
  secret: string;
  outbound: Pick<OutboundService, 'enqueueEmail'>;
  currentPublicUrl: () => string;
  /** Lifetime of an emailed sign-in link (LEADS_SIGNIN_LINK_TTL_S). */
  linkTtlMs?: number;
  now?: () => Date;
}

const emailSubject = (email: string) => `email:${email.trim().toLowerCase()}`;
const addressSubject = (address: string) => `address:${address}`;

function invalidCredentials(): AppError {
  return new AppError('invalid_credentials');
}

/**
 * Signing in and out (decisions §14): passwords, one-time links, sessions and the limit of
 * failed attempts. Sessions are rows (`sessions`); the cookie holds a random value of which the
 * database keeps the SHA-256, and the CSRF token is derived from it.
 */
export function createSessionsService({
  db,
  repo,
  secret,
  outbound,
  currentPublicUrl,
  linkTtlMs = 900_000,
  now = () => new Date(),
}: SessionsServiceDeps) {
  /** 429 when a subject has failed too often in the window; Retry-After until its oldest failure leaves it. */
  async function checkLimit(subjects: string[], max: number): Promise<boolean> {
    const at = now().getTime();
    const counts = await repo.failuresSince(subjects, new Date(at - FAILURE_WINDOW_MS));
    const over = counts.filter((row) => row.count >= max);
    if (over.length === 0) return true;
    const waitMs = Math.max(...over.map((row) => row.first.getTime() + FAILURE_WINDOW_MS - at));
    throw new AppError('rate_limited', {
      message: 'Too many failed sign-ins; try again later',
      headers: { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) },
    });
  }

  async function recordFailure(subjects: string[]) {
    const at = now();
    await repo.insertFailures(subjects, at, new Date(at.getTime() - FAILURE_WINDOW_MS));
  }

  async function start(
    user: {
      account_id: string;
      id: string;
      email: string;
      name: string;
      role: Role;
      password_hash: string | null;
    },
    via: 'password' | 'link',
    tx: Executor = db,
  ): Promise<StartedSession> {
    const token = generateToken('ls_');
    const at = now();
    await repo.deleteEndedSessions(user.account_id, user.id, at, SESSION_IDLE_MS, tx);
    await repo.insertSession(
      user.account_id,
      {
        userId: user.id,
        tokenHash: hashSecret(token),
        via,
        expiresAt: new Date(at.getTime() + SESSION_ABSOLUTE_MS),
      },
      tx,
    );
    return {
      token,
      view: {
        user: {
          id: user.id,
          email: user.email,
          name: user.name,
          role: user.role,
          account_id: user.account_id,
          has_password: user.password_hash !== null,
        },
        csrf_token: csrfTokenOf(secret, token),
      },
    };
  }

  /** A new one-time sign-in token of a user (emailed links, the first start's link). */
  async function issueLink(accountId: string, userId: string, ttlMs: number, tx: Executor = db) {
    const token = generateToken('sl_');
    await repo.deleteSpentSignInTokens(accountId, userId, now(), tx);
    await repo.insertSignInToken(
      accountId,
      { userId, tokenHash: hashSecret(token), expiresAt: new Date(now().getTime() + ttlMs) },
      tx,
    );
    return token;
  }

  /** The user of a live sign-in token, which is used up by this call; null when there is none. */
  async function consumeToken(token: string, tx: Executor = db) {
    if (!token.startsWith('sl_') || token.length > 100) return null;
    const used = await repo.useSignInToken(hashSecret(token), now(), tx);
    if (!used) return null;
    return (await repo.findUser(used.account_id, used.user_id, tx)) ?? null;
  }

  return {
    /** The cookie is `Secure` when PUBLIC_URL is https (read each time: it may change at start). */
    cookieSecure(): boolean {
      return currentPublicUrl().startsWith('https:');
    },

    async signInWithPassword(
      input: { email: string; password: string; accountId?: string },
      clientAddress: string,
    ): Promise<StartedSession> {
      const subjects = [emailSubject(input.email), addressSubject(clientAddress)];
      await checkLimit(subjects, MAX_FAILURES);
      const users = (await repo.usersByEmail(input.email.trim(), MAX_ACCOUNTS_PER_EMAIL)).filter(
        (user) => input.accountId === undefined || user.account_id === input.accountId,
      );
      // The same work whether or not the email is known: one verification at least.
      const withPassword = users.filter((user) => user.password_hash !== null);
      let matched: (typeof users)[number] | undefined;
      if (withPassword.length === 0) await verifyPassword(null, input.password);
      for (const user of withPassword) {
        if (await verifyPassword(user.password_hash, input.password)) {
          matched = user;
          break;
        }
      }
      if (!matched) {
        await recordFailure(subjects);
        throw invalidCredentials();
      }
      await repo.clearFailures(subjects[0]!);
      return start(matched, 'password');
    },

    async signInWithToken(token: string, clientAddress: string): Promise<StartedSession> {
      const subjects = [addressSubject(clientAddress)];
      await checkLimit(subjects, MAX_FAILURES);
      const started = await db.transaction().execute(async (tx) => {
        const user = await consumeToken(token, tx);
        return user ? start(user, 'link', tx) : null;
      });
      if (!started) {
        await recordFailure(subjects);
        throw invalidCredentials();
      }
      return started;
    },

    /** What `GET /api/v1/session` answers while the session lives. */
    view(session: SessionCredential): SessionView {
      return {
        user: {
          id: session.user.id,
          email: session.user.email,
          name: session.user.name,
          role: session.user.role,
          account_id: session.account.id,
          has_password: session.user.hasPassword,
        },
        csrf_token: session.csrfToken,
      };
    },

    async signOut(session: SessionCredential): Promise<void> {
      await repo.deleteSession(session.account.id, session.sessionId);
    },

    /**
     * Sends a one-time sign-in link to every account the address is a user of (each email
     * names its account). Nothing tells the caller whether the address is known; over the
     * link limit nothing more is sent.
     */
    async requestLink(email: string, clientAddress: string, language: Language): Promise<void> {
      const subjects = [`link:${email.trim().toLowerCase()}`, `link-address:${clientAddress}`];
      const at = now();
      const counts = await repo.failuresSince(subjects, new Date(at.getTime() - FAILURE_WINDOW_MS));
      const sent = (subject: string) => counts.find((row) => row.subject === subject)?.count ?? 0;
      if (sent(subjects[0]!) >= MAX_LINKS_PER_EMAIL || sent(subjects[1]!) >= MAX_LINKS_PER_ADDRESS) return;
      await recordFailure(subjects);
      const users = await repo.usersByEmail(email.trim(), MAX_ACCOUNTS_PER_EMAIL);
      for (const user of users) {
        await db.transaction().execute(async (tx) => {
          const token = await issueLink(user.account_id, user.id, linkTtlMs, tx);
          await outbound.enqueueEmail(
            tx,
            user.account_id,
            signInEmail(language, {
              to: user.email,
              name: user.name,
              account: user.account_name,
              link: `${currentPublicUrl()}/sign-in/${token}`,
              ttlMs: linkTtlMs,
            }),
            { type: 'session.sign_in_link', ref: user.id },
          );
        });
      }
    },

    issueLink,

    /**
     * Invites a person just added: a one-time sign-in link valid 7 days (longer than an
     * asked-for link: an invitation may wait in a mailbox), emailed through the outbound engine
     * in the caller's transaction, so that a refused creation sends nothing. Answers when the
     * link expires.
     */
    async invite(
      tx: Executor,
      accountId: string,
      invitee: { id: string; email: string; name: string; accountName: string },
      language: Language,
    ): Promise<Date> {
      const ttlMs = INVITATION_TTL_MS;
      const token = await issueLink(accountId, invitee.id, ttlMs, tx);
      await outbound.enqueueEmail(
        tx,
        accountId,
        invitationEmail(language, {
          to: invitee.email,
          name: invitee.name,
          account: invitee.accountName,
          link: `${currentPublicUrl()}/sign-in/${token}`,
          ttlMs,
        }),
        { type: 'user.invitation', ref: invitee.id },
      );
      return new Date(now().getTime() + ttlMs);
    },

    /**
     * Sets a password: with a sign-in token (used up), or signed in with the current password,
     * or signed in alone when the person has none yet or signed in by a link in the last
     * link lifetime (a reset). Every other session of the person ends.
     */
    async setPassword(
      input: { token?: string; currentPassword?: string; password: string },
      session: SessionCredential | null,
      clientAddress: string,
    ): Promise<void> {
      if (input.token !== undefined) {
        await checkLimit([addressSubject(clientAddress)], MAX_FAILURES);
        const passwordHash = await hashPassword(input.password);
        const done = await db.transaction().execute(async (tx) => {
          const user = await consumeToken(input.token!, tx);
          if (!user) return false;
          await repo.setPassword(user.account_id, user.id, passwordHash, tx);
          await repo.deleteUserSessions(user.account_id, user.id, null, tx);
          return true;
        });
        if (!done) {
          await recordFailure([addressSubject(clientAddress)]);
          throw invalidCredentials();
        }
        return;
      }
      if (!session) throw new AppError('unauthorized');
      const accountId = session.account.id;
      const user = await repo.findUser(accountId, session.user.id);
      if (!user) throw new AppError('unauthorized');
      if (input.currentPassword !== undefined) {
        const subjects = [emailSubject(user.email), addressSubject(clientAddress)];
        await checkLimit(subjects, MAX_FAILURES);
        if (!(await verifyPassword(user.password_hash, input.currentPassword))) {
          await recordFailure(subjects);
          throw invalidCredentials();
        }
      } else {
        const byRecentLink =
          session.via === 'link' && now().getTime() - session.startedAt.getTime() <= linkTtlMs;
        if (user.password_hash !== null && !byRecentLink) {
          throw new AppError('validation_failed', {
            details: [
              {
                key: 'current_password',
                reason: 'required',
                message: 'give the current password to change it',
              },
            ],
          });
        }
      }
      const passwordHash = await hashPassword(input.password);
      await db.transaction().execute(async (tx) => {
        await repo.setPassword(accountId, user.id, passwordHash, tx);
        await repo.deleteUserSessions(accountId, user.id, session.sessionId, tx);
      });
    },

    /** Ends every session of a user at once (removal, change of role). */
    revokeUser(accountId: string, userId: string, tx: Executor = db): Promise<void> {
      return repo.deleteUserSessions(accountId, userId, null, tx);
    },
  };
}

export type SessionsService = ReturnType<typeof createSessionsService>;
