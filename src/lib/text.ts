/**
 * Text PostgreSQL can store. `text` and `jsonb` refuse the NUL character and UTF-16 surrogates
 * without their pair (JavaScript strings may hold both), so such text is refused at the edge
 * (http/body-limits.ts) and never made by cutting a string between the two halves of a pair.
 */

/** NUL or any surrogate: the cheap first test; a hit is then checked exactly. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding NUL is the point.
const SUSPECT = /[\u0000\uD800-\uDFFF]/;
/** NUL or a surrogate without its pair (with the `u` flag a pair is one code point). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding NUL is the point.
const UNSTORABLE = /[\u0000\p{Cs}]/gu;

export function isStorableText(text: string): boolean {
  return !SUSPECT.test(text) || (!text.includes('\u0000') && text.isWellFormed());
}

/** The text with NUL and unpaired surrogates written as `\uXXXX`, to name them in an answer. */
export function escapeUnstorable(text: string): string {
  if (isStorableText(text)) return text;
  return text.replace(UNSTORABLE, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The text without NUL and unpaired surrogates. */
export function withoutUnstorable(text: string): string {
  return isStorableText(text) ? text : text.replace(UNSTORABLE, '');
}

/** Whether `text` has more than `max` code points; its UTF-16 length is an upper bound, checked first. */
export function longerThan(text: string, max: number): boolean {
  return text.length > max && codePointLength(text) > max;
}

/** Length in code points (a surrogate pair, such as an emoji, is one), as JSON Schema counts. */
export function codePointLength(text: string): number {
  let pairs = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        pairs++;
        i++;
      }
    }
  }
  return text.length - pairs;
}

/** At most `max` UTF-16 units, never ending in the first half of a surrogate pair. */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

const HTML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text safe inside HTML element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/**
 * The form in which the service compares what people typed (duplicate keys, email look-ups,
 * select options): trimmed, lower case and in Unicode's composed form (NFC), so that a letter
 * written with its accent as one character (`ü`, U+00FC) and as two (`u` + U+0308, as some
 * keyboards and systems send it) is the same letter. Stored values keep the spelling given.
 */
export function matchingForm(text: string): string {
  const lower = text.trim().toLowerCase();
  return MAY_COMPOSE.test(lower) ? lower.normalize('NFC') : lower;
}

/**
 * A character from U+0300 on, where the combining marks begin: text without one is in NFC
 * already (no character below it changes, and no two of them compose), so the common case, such
 * as an email address, skips the normalizer (0.06 against 0.17 µs).
 */
const MAY_COMPOSE = /[\u0300-\uffff]/;
