// Kept apart from entities.model.ts, which the console imports: this one reads intake's own
// lists, and with them the service's intake code, which has no place in the console's build.
import { S1_RESERVED_KEYS, S2_RESERVED_KEYS } from '../intake/intake.handover.ts';

/**
 * Names intake takes at the top level of a record for itself (S2's and S1's, those a field key
 * could be): a field keyed so could not be sent at the top level, where a plain form sends it.
 */
export const RESERVED_FIELD_KEYS: readonly string[] = [
  ...new Set([...S2_RESERVED_KEYS, ...S1_RESERVED_KEYS]),
].filter((name) => /^[a-z][a-z0-9_]*$/.test(name));
