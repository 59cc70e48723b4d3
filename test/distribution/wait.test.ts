import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { waitFor } from '../outbound/receiver.ts';
import { type DistributionWorld, startDistributionWorld } from './support.ts';

describe.each(TEST_DATABASES)('the start call’s wait for first attempts on %s', (kind) => {
  let w: DistributionWorld;
  beforeAll(async () => {
    // The answer waits 1.5 s at most here (10 s in production); an attempt may take 3 s. (At
    // 400 ms an SMTP exchange on the embedded database under the full suite's load once missed it.)
    w = await startDistributionWorld(kind, {
      distribution: { firstAttemptWaitMs: 1_500 },
      outbound: { webhookTimeoutMs: 3_000 },
    });
  });
  afterAll(async () => {
    await w?.close();
  });

  it('answers pending when the first attempt outlasts the wait, and never waits on it', async () => {
    const { account, factory, record, start, webhookPartner } = await w.account();
    const distributionId = await factory.distribution('lead');
    const slow = await webhookPartner(distributionId, { name: 'Slow' });
    await factory.rule(distributionId, { participationIds: [slow.participationId] });
    slow.receiver.answerNext('hang');
    const began = Date.now();
    const answer = (await start(await record())).json();
    const took = Date.now() - began;
    expect(answer).toMatchObject({ status: 'distributed', partner: [{ name: 'Slow', status: 'pending' }] });
    // Below the attempt's 3 s timeout: the answer did not wait for it.
    expect(took).toBeLessThan(2_900);
    expect(slow.receiver.received).toHaveLength(1);
    // The hanging attempt times out after 3 s; the retry delivers it with the same webhook-id.
    const delivered = await waitFor(async () => {
      const run = (
        await w.t.request({
          method: 'GET',
          url: `/api/v1/distribution/distributions/${answer.run_id}`,
          key: account.apiKey,
        })
      ).json();
      return run.deliveries[0].status === 'delivered' && run.deliveries[0];
    }, 15_000);
    expect(delivered.attempts).toBe(2);
    expect(slow.receiver.received[1]!.headers['webhook-id']).toBe(
      slow.receiver.received[0]!.headers['webhook-id'],
    );
  });

  it('fails an email delivery the mail server refuses for good, and says so to the account', async () => {
    const { factory, record, start, subscribe } = await w.account();
    const events = await subscribe(['delivery.failed']);
    const distributionId = await factory.distribution('lead');
    const partnerId = await factory.partner({ name: 'Refusing' });
    const participation = await factory.participation(distributionId, {
      partnerId,
      channel: 'email',
      address: 'refused@partner.test',
    });
    await factory.rule(distributionId, { participationIds: [participation.id] });
    const answer = (await start(await record())).json();
    expect(answer.partner[0]).toMatchObject({ channel: 'email', status: 'failed' });
    await waitFor(() => events.received.length >= 1);
    expect(events.received[0]!.json).toMatchObject({
      type: 'delivery.failed',
      data: { delivery: { channel: 'email', status: 'failed', error: 'smtp_550', partner: 'Refusing' } },
    });
  });
});
