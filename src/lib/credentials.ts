import { createHmac, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function toBase62(bytes: Uint8Array): string {
  let value = BigInt(`0x${Buffer.from(bytes).toString('hex') || '0'}`);
  let out = '';
  while (value > 0n) {
    out = BASE62[Number(value % 62n)] + out;
    value /= 62n;
  }
  return out;
}

function base62Fixed(value: number, width: number): string {
  let out = '';
  let rest = value;
  for (let i = 0; i < width; i++) {
    out = BASE62[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out;
}

/** 6 base62 characters of the CRC32 of the body, so a mistyped key is refused without a lookup. */
function checksum(body: string): string {
  return base62Fixed(crc32(body), 6);
}

/** 160 random bits: above the 128 that decisions §9 asks for, and 27 base62 characters. */
function randomBody(): string {
  return toBase62(randomBytes(20)).padStart(27, '0');
}

export const API_KEY_PREFIX = 'lk_';
const API_KEY_PATTERN = /^lk_[0-9A-Za-z]{27}[0-9A-Za-z]{6}$/;

export function generateApiKey(): string {
  const body = `${API_KEY_PREFIX}${randomBody()}`;
  return body + checksum(body);
}

/** Shape and checksum only; says nothing of whether the key exists. */
export function isWellFormedApiKey(value: string): boolean {
  if (!API_KEY_PATTERN.test(value)) return false;
  return checksum(value.slice(0, -6)) === value.slice(-6);
}

/** The part of a key shown in listings so that people can tell keys apart. */
export function displayPrefix(secret: string): string {
  return secret.slice(0, 10);
}

/** `ls_`: a session cookie's value; `sl_`: a one-time sign-in link's token. */
export function generateToken(prefix: 'st_' | 'rt_' | 'bk_' | 'adm_' | 'ls_' | 'sl_'): string {
  return prefix + toBase62(randomBytes(24)).padStart(33, '0');
}

/**
 * What the database keeps of a secret: its SHA-256. Node's one-shot `hash` (no Hash object) is
 * about a third cheaper, and every API-key request hashes its key.
 */
export function hashSecret(secret: string): Buffer {
  return hash('sha256', secret, 'buffer');
}

export function safeEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Constant-time comparison of two strings of any length (hashes first, so lengths match). */
export function safeEqualStrings(a: string, b: string): boolean {
  return timingSafeEqual(hashSecret(a), hashSecret(b));
}

export function hmacBase64Url(secret: string, message: string): string {
  return createHmac('sha256', secret).update(message, 'utf8').digest('base64url');
}
