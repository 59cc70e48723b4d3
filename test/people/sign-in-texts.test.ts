import { describe, expect, it } from 'vitest';
import { signInEmail } from '../../src/modules/people/sign-in.texts.ts';

const mail = (ttlMs: number) => ({
  to: 'mia@people.test',
  name: 'Mia',
  account: 'Solar GmbH',
  link: 'http://127.0.0.1:3000/session/link/x',
  ttlMs,
});
const stated = (language: 'en' | 'de', ttlMs: number) =>
  /(?:within|innerhalb von) (\d+ \S+)\./.exec(signInEmail(language, mail(ttlMs)).text ?? '')?.[1];

describe('the sign-in email states the link lifetime', () => {
  it('in whole minutes, hours or days when it is one', () => {
    expect(stated('en', 900_000)).toBe('15 minutes');
    expect(stated('en', 60_000)).toBe('1 minute');
    expect(stated('en', 3_600_000)).toBe('1 hour');
    expect(stated('en', 86_400_000)).toBe('1 day');
    expect(stated('en', 7 * 86_400_000)).toBe('7 days');
    expect(stated('en', 90_000_000)).toBe('25 hours');
    expect(stated('de', 86_400_000)).toBe('1 Tag');
    expect(stated('de', 7 * 86_400_000)).toBe('7 Tagen');
    expect(stated('de', 7_200_000)).toBe('2 Stunden');
    expect(stated('de', 900_000)).toBe('15 Minuten');
  });

  it('never as more time than the link has (LEADS_SIGNIN_LINK_TTL_S takes any number of seconds)', () => {
    expect(stated('en', 30_000)).toBe('30 seconds');
    expect(stated('en', 1_000)).toBe('1 second');
    expect(stated('de', 45_000)).toBe('45 Sekunden');
    // 90 s and 5,430 s: rounded down to the minute, where rounding gave 2 and 91 minutes.
    expect(stated('en', 90_000)).toBe('1 minute');
    expect(stated('en', 5_430_000)).toBe('90 minutes');
  });
});
