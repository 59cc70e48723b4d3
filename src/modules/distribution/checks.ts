/** Small checks the distribution settings share. */

/** An email address as a person types it: something@domain.tld, no spaces or angle brackets. */
export const EMAIL_ADDRESS = /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/;
