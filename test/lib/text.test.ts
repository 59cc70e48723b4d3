import { describe, expect, it } from 'vitest';
import { matchingForm } from '../../src/lib/text.ts';

describe('the matching form of typed text', () => {
  it('is trimmed and lower case', () => {
    expect(matchingForm('  Lead.One@Example.COM ')).toBe('lead.one@example.com');
    expect(matchingForm('ÜBER Straße')).toBe('über straße');
  });

  it('writes a letter and its combining accent as the one composed letter', () => {
    // u + U+0308 (combining diaeresis) and U+00FC are one letter; A + U+0301 is U+00E1.
    expect(matchingForm('Mu\u0308ller')).toBe('m\u00fcller');
    expect(matchingForm('A\u0301lvaro')).toBe('\u00e1lvaro');
    // Hangul jamo compose into their syllable.
    expect(matchingForm('\u1100\u1161')).toBe('\uac00');
  });

  it('equals the normalizer’s answer for every pair of characters below the combining marks', () => {
    for (let first = 0; first < 0x300; first += 1) {
      for (const second of [0x41, 0xe9, 0x1c4, 0x2b0, 0x2ff]) {
        const text = String.fromCharCode(first, second);
        expect(matchingForm(text)).toBe(text.trim().toLowerCase().normalize('NFC'));
      }
    }
  });
});
