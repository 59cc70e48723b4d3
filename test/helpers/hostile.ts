import fc from 'fast-check';

/**
 * Generators of hostile input for property tests: full Unicode (astral code points, NUL, lone
 * surrogates of both halves), over-long text, numbers JSON cannot hold, and the encoders that put
 * them on the wire as JSON text, form bodies, query strings and path segments.
 */

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code));
/** One unit of text: any code point, often NUL, a lone surrogate, a control or an ASCII character. */
export const hostileUnit: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 4 },
  { arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }), weight: 4 },
  { arbitrary: fc.constant('\u0000'), weight: 1 },
  { arbitrary: loneSurrogate, weight: 1 },
  { arbitrary: fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 1 }), weight: 1 },
  { arbitrary: fc.constantFrom('😀', '\uFFFD', '\uFEFF', '\u2028', '%', '[', ']', '&', '=', '.'), weight: 1 },
);

/** Text of hostile units, now and then longer than any limit the service has. */
export function hostileText(maxLength = 30): fc.Arbitrary<string> {
  const overLong = fc
    .tuple(
      fc.constantFrom(101, 201, 256, 301, 501, 2_049, 10_001, 100_001),
      fc.string({ unit: hostileUnit, maxLength: 3 }),
    )
    .map(([length, tail]) => 'a'.repeat(length) + tail);
  return fc.oneof(
    { arbitrary: fc.string({ unit: hostileUnit, maxLength }), weight: 12 },
    { arbitrary: overLong, weight: 1 },
  );
}

/** A number as JSON text, so that literals such as `1e309` and `-0` reach the parser as written. */
export class JsonNumber {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

/** Raw bytes inside a JSON string, invalid UTF-8 included. */
export class RawBytes {
  readonly bytes: Uint8Array;
  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }
}

export const hostileNumber: fc.Arbitrary<JsonNumber> = fc.oneof(
  fc.integer().map((n) => new JsonNumber(String(n))),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => new JsonNumber(JSON.stringify(n))),
  fc
    .constantFrom(
      '1e309',
      '-1e309',
      '1E+400',
      '-0',
      '-0.0',
      '0e0',
      '5e-324',
      '1e-400',
      '1.7976931348623157e308',
      '123456789012345678901234567890',
      '9007199254740993',
      '42',
      '0',
      '1',
    )
    .map((text) => new JsonNumber(text)),
);

const rawBytes = fc
  .uint8Array({ maxLength: 8 })
  // Bytes that end a JSON string or escape would make the body malformed rather than odd.
  .map((bytes) => new RawBytes(bytes.filter((byte) => byte !== 0x22 && byte !== 0x5c && byte >= 0x20)));

/** Keys worth trying beside random ones: real fields and nodes, hostile and prototype keys. */
export const interestingKey = fc.constantFrom(
  'email',
  'E-Mail Address',
  'first_name',
  'last_name',
  'budget',
  'rooms',
  'interest',
  'topics',
  'consent',
  'birthday',
  'callback_at',
  'message',
  'utm_source',
  '__proto__',
  'constructor',
  'entity',
  'fields',
  'meta',
  'note',
  'notes',
  'crm',
  'documents',
  'external_id',
  'idempotency_key',
  'source',
  'assignee',
  'viewers',
  'name',
  'key',
  'label',
  'type',
  'options',
  'stage',
  'status:Sales',
);
export const hostileKey = fc.oneof(
  { arbitrary: interestingKey, weight: 3 },
  { arbitrary: hostileText(20), weight: 2 },
);

export const hostileLeaf: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: hostileText(), weight: 6 },
  { arbitrary: hostileNumber, weight: 2 },
  {
    arbitrary: fc.constantFrom('Solar', 'yes', '2024-02-29', '2024-02-29T10:00:00Z', 'a@b.co', '', ' '),
    weight: 2,
  },
  { arbitrary: fc.boolean(), weight: 1 },
  { arbitrary: fc.constant(null), weight: 1 },
  { arbitrary: rawBytes, weight: 1 },
);

/** Any JSON value of hostile leaves, a few levels deep. */
export const hostileValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  tree: fc.oneof({ depthSize: 'small' }, hostileLeaf, tie('array'), tie('object')),
  array: fc.array(tie('tree'), { maxLength: 4 }),
  object: fc.dictionary(hostileKey, tie('tree'), { maxKeys: 5 }),
})).tree;

export function hostileObject(maxKeys = 6): fc.Arbitrary<Record<string, unknown>> {
  return fc.dictionary(hostileKey, hostileValue, { maxKeys });
}

/** JSON text of a value, numbers and raw bytes as generated; strings escaped as JSON.stringify does. */
export function toJsonBody(value: unknown): Buffer {
  const chunks: Buffer[] = [];
  const emit = (current: unknown): void => {
    if (current instanceof JsonNumber) chunks.push(Buffer.from(current.text));
    else if (current instanceof RawBytes)
      chunks.push(Buffer.from('"'), Buffer.from(current.bytes), Buffer.from('"'));
    else if (Array.isArray(current)) {
      chunks.push(Buffer.from('['));
      current.forEach((item, index) => {
        if (index > 0) chunks.push(Buffer.from(','));
        emit(item);
      });
      chunks.push(Buffer.from(']'));
    } else if (current !== null && typeof current === 'object') {
      chunks.push(Buffer.from('{'));
      Object.keys(current).forEach((key, index) => {
        if (index > 0) chunks.push(Buffer.from(','));
        chunks.push(Buffer.from(`${JSON.stringify(key)}:`));
        emit((current as Record<string, unknown>)[key]);
      });
      chunks.push(Buffer.from('}'));
    } else {
      chunks.push(Buffer.from(JSON.stringify(current ?? null)));
    }
  };
  emit(value);
  return Buffer.concat(chunks);
}

/**
 * Percent-encodes text as a careless client would: UTF-8 for code points, and the three bytes a
 * lone surrogate would have (`%ED%A0%80`), which are not UTF-8.
 */
export function percentEncode(text: string): string {
  let out = '';
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    const next = text.charCodeAt(index + 1);
    if (code >= 0xd800 && code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      out += encodeURIComponent(text.slice(index, index + 2));
      index++;
    } else if (code >= 0xd800 && code <= 0xdfff) {
      const bytes = [0xed, 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)];
      out += bytes.map((byte) => `%${byte.toString(16).toUpperCase()}`).join('');
    } else {
      out += encodeURIComponent(text[index]!);
    }
  }
  return out;
}

/** A flat form body or query string; arrays repeat the key; values of other types as text. */
/** A form value as text; raw bytes as Latin-1 characters, one per byte. */
function formText(item: unknown): string {
  if (item instanceof JsonNumber) return item.text;
  if (item instanceof RawBytes) return Buffer.from(item.bytes).toString('latin1');
  return typeof item === 'string' ? item : JSON.stringify(item ?? '');
}

export function formEncode(values: Record<string, unknown>): string {
  const pairs: string[] = [];
  for (const [key, value] of Object.entries(values)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      pairs.push(`${percentEncode(key)}=${percentEncode(formText(item))}`);
    }
  }
  return pairs.join('&');
}

const MULTIPART_BOUNDARY = '----hostileBoundary0123456789';
export const MULTIPART_TYPE = `multipart/form-data; boundary=${MULTIPART_BOUNDARY}`;

/**
 * The same values as a browser's multipart body: names as UTF-8 with `"`, CR and LF escaped as
 * a browser does, raw bytes as they are, and one file part.
 */
export function multipartEncode(values: Record<string, unknown>): Buffer {
  const chunks: Buffer[] = [];
  const part = (name: string, value: Buffer, file = false) => {
    const escaped = name.replaceAll('"', '%22').replaceAll('\r', '%0D').replaceAll('\n', '%0A');
    const disposition = `form-data; name="${escaped}"${file ? '; filename="x.bin"' : ''}`;
    chunks.push(
      Buffer.from(`--${MULTIPART_BOUNDARY}\r\nContent-Disposition: ${disposition}\r\n\r\n`),
      value,
      Buffer.from('\r\n'),
    );
  };
  for (const [key, value] of Object.entries(values)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      part(key, item instanceof RawBytes ? Buffer.from(item.bytes) : Buffer.from(formText(item)));
    }
  }
  part('upload', Buffer.from([0, 255, 1]), true);
  chunks.push(Buffer.from(`--${MULTIPART_BOUNDARY}--\r\n`));
  return Buffer.concat(chunks);
}

/** Keys of a form body: plain, bracketed (`fields[email]`, `a[]`) and hostile. */
export const formKey = fc.oneof(
  { arbitrary: hostileKey, weight: 3 },
  { arbitrary: fc.tuple(hostileKey, hostileKey).map(([outer, inner]) => `${outer}[${inner}]`), weight: 1 },
  { arbitrary: hostileKey.map((key) => `${key}[]`), weight: 1 },
);
export const formBody = fc.dictionary(
  formKey,
  fc.oneof(hostileLeaf, fc.array(hostileLeaf, { maxLength: 3 })),
  {
    maxKeys: 8,
  },
);

/** Raw escapes that are not text, mixed into an encoded string as they are. */
export const rawEscape = fc.constantFrom(
  '%00',
  '%ED%A0%80',
  '%ED%BF%BF',
  '%C0%80',
  '%FF',
  '%zz',
  '%',
  '%E2%82',
);
