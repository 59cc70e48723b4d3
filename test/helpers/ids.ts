/** A UUID of version 7 and the RFC 9562 variant (the time-ordered ids of src/lib/ids.ts). */
export const TIME_ORDERED_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The Unix time in milliseconds a version 7 UUID begins with. */
export const millisecondsOf = (id: string): number =>
  Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);
