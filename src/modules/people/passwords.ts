import { randomBytes } from 'node:crypto';

/** Passwords are 10 to 256 characters (decisions §14; the upper bound caps the hashing work). */
export const PASSWORD_MIN_LENGTH = 10;
export const PASSWORD_MAX_LENGTH = 256;

/**
 * argon2id (the library's default algorithm) with OWASP's recommended minimum: 19 MiB, two
 * passes, one lane. The library hashes on its own threads: the event loop is not blocked.
 */
const OPTIONS = { memoryCost: 19_456, timeCost: 2, parallelism: 1 };

/**
 * The native argon2 library is loaded with the first password hashed or checked, not with the
 * service: most processes never see a password (API keys and tokens are not passwords).
 */
let argon2Loading: Promise<typeof import('@node-rs/argon2')> | undefined;
function argon2(): Promise<typeof import('@node-rs/argon2')> {
  argon2Loading ??= import('@node-rs/argon2');
  return argon2Loading;
}

export async function hashPassword(password: string): Promise<string> {
  const { hash } = await argon2();
  return hash(password, OPTIONS);
}

/** A hash of a random password, so that an unknown person costs the same time as a known one. */
let dummyHash: Promise<string> | undefined;

/**
 * Whether the password matches the stored hash. Without a stored hash (an unknown email, a
 * person without a password) a dummy hash is verified, so both cases take the same time.
 */
export async function verifyPassword(stored: string | null, password: string): Promise<boolean> {
  const { verify } = await argon2();
  if (stored === null) {
    dummyHash ??= hashPassword(randomBytes(18).toString('base64'));
    await verify(await dummyHash, password).catch(() => false);
    return false;
  }
  return verify(stored, password).catch(() => false);
}
