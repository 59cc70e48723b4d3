import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';

/**
 * The timing settings of decisions §12 ("operators tune them; tests shorten them"), and the
 * sign-in link's beside them: each takes seconds, so that retries and expiries show in a test.
 */
describe('timing settings', () => {
  it('take a few seconds, so that a test sees a retry, a disable and an expiry', () => {
    const config = loadConfig({
      LEADS_RETRY_SCHEDULE: '0.2,1',
      LEADS_WEBHOOK_DISABLE_AFTER_S: '2',
      LEADS_BOOKING_LINK_TTL_S: '2',
      LEADS_SIGNIN_LINK_TTL_S: '1',
    });
    expect(config.retryScheduleMs).toEqual([200, 1000]);
    expect(config.webhookDisableAfterMs).toBe(2000);
    expect(config.bookingLinkTtlMs).toBe(2000);
    expect(config.signInLinkTtlMs).toBe(1000);
  });

  it('keep their defaults when unset', () => {
    const config = loadConfig({});
    expect(config.retryScheduleMs[0]).toBe(5000);
    expect(config.webhookDisableAfterMs).toBe(432_000_000);
    expect(config.bookingLinkTtlMs).toBe(1_209_600_000);
    expect(config.signInLinkTtlMs).toBe(900_000);
  });

  it('refuse what is not a whole number of seconds, naming the setting', () => {
    for (const wrong of ['0', '-1', '1.5', 'soon']) {
      expect(() => loadConfig({ LEADS_BOOKING_LINK_TTL_S: wrong }), wrong).toThrow(
        /LEADS_BOOKING_LINK_TTL_S/,
      );
    }
  });
});
