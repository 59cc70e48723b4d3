import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/**
 * Migration 0023 gives messages an origin (the automation that sent them) so that an
 * automation's attempts can be listed; messages automations sent before it learn theirs from
 * the automation id in their `ref`, and other modules' messages (whose refs need not be JSON)
 * are left alone.
 */
describe.each(TEST_DATABASES)('migration 0023 (outbound origin) on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => t?.close());

  it('names the automation of its earlier messages and their attempts, and lists them', async () => {
    const account = await accountWithLeads(t, { modules: ['crm'] });
    const automation = await t.request({
      method: 'POST',
      url: '/api/v1/settings/automations',
      key: account.apiKey,
      body: { name: 'Mail', entity: 'lead', stage: 'Won', action: { type: 'note', body: 'x' } },
    });
    const automationId = automation.json().id as string;
    const earlier = randomUUID();
    const other = randomUUID();
    const message = (id: string, notify: string, ref: string) => ({
      account_id: account.id,
      id,
      channel: 'email',
      destination_id: null,
      event_type: 'automation.email',
      payload: JSON.stringify({ to: ['a@b.co'], subject: 's', text: 't' }),
      status: 'failed',
      notify,
      ref,
    });
    await t.db
      .insertInto('outbound_messages')
      .values([
        message(
          earlier,
          'crm.automation',
          JSON.stringify({ record: randomUUID(), automation: automationId }),
        ),
        message(other, 'some.module', 'not json at all'),
      ])
      .execute();
    await t.db
      .insertInto('outbound_attempts')
      .values(
        [earlier, other].map((messageId) => ({
          account_id: account.id,
          id: randomUUID(),
          message_id: messageId,
          destination_id: null,
          attempt: 1,
          outcome: 'failed',
          status_code: 550,
          reply: null,
          error: 'mailbox unavailable',
          duration_ms: 12,
        })),
      )
      .execute();

    await sql`DELETE FROM schema_migrations WHERE name = '0023_outbound_origin.sql'`.execute(t.db);
    expect((await migrate(t.db)).applied).toEqual(['0023_outbound_origin.sql']);

    const origins = await t.db
      .selectFrom('outbound_attempts')
      .select(['message_id', 'origin_id'])
      .where('account_id', '=', account.id)
      .execute();
    expect(Object.fromEntries(origins.map((row) => [row.message_id, row.origin_id]))).toEqual({
      [earlier]: automationId,
      [other]: null,
    });
    const listed = await t.request({
      method: 'GET',
      url: `/api/v1/settings/automations/${automationId}/attempts`,
      key: account.apiKey,
    });
    expect(listed.json().attempts).toMatchObject([
      { message_id: earlier, outcome: 'failed', status_code: 550, error: 'mailbox unavailable' },
    ]);
  });
});
