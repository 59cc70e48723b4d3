// Import-free, so that the web console reads the same list (console/src/areas/settings/api.ts).

/** Every event name an account webhook may subscribe to (decisions §12). */
export const WEBHOOK_EVENTS = [
  'record.created',
  'record.updated',
  'record.stage_changed',
  'note.added',
  'document.attached',
  'delivery.delivered',
  'delivery.failed',
  'delivery.returned',
  'booking.created',
  'booking.cancelled',
] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];
