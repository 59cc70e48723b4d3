/**
 * A URL as it is written (docs/decisions.md, Outbound messages): `http://` or `https://` and the
 * host right after, no blank, control character or backslash anywhere. The URL parser mends
 * what this refuses (it drops blanks around the text, reads `http:/host` and `http:\\host` as
 * `http://host`), so a checked value would be stored and shown other than it is used; a URL is
 * not a name to trim.
 */
const URL_START = /^https?:\/\/[^/]/i;
const NOT_IN_URL = /[\s\p{Cc}\\]/u;

/** The http(s) URL a text is, when it is written as one (see above); else undefined. */
export function writtenHttpUrl(text: string): URL | undefined {
  if (!URL_START.test(text) || NOT_IN_URL.test(text)) return undefined;
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}
