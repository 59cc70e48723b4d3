// Shapes of the settings API the settings screens use (decisions §2, §3, §11, §12, §13, §14).

export const PERMISSIONS = [
  'records:read',
  'records:write',
  'notes:write',
  'documents:read',
  'crm',
  'distribution',
  'booking',
  'settings',
] as const;

export interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  strict: boolean;
  permissions: string[];
  created_at: string;
}
export interface CreatedApiKey extends ApiKey {
  key: string;
}

export interface FormSettings {
  success_url: string | null;
  error_url: string | null;
  allowed_origins: string[];
  honeypot_field: string | null;
  rate_limit_per_minute: number;
}
export interface Source extends FormSettings {
  id: string;
  name: string;
  token_prefix: string | null;
  created_at: string;
}
export interface NewToken {
  token: string;
  intake_url: string;
}

// The service's own lists (an import-free module), so that the screens cannot drift from it.
import { FORMATS_BY_TYPE as SERVICE_FORMATS } from '../../../../src/modules/entities/entities.model.ts';

export {
  DUPLICATE_ACTIONS,
  FIELD_TYPES,
  ROLES as FIELD_ROLES,
} from '../../../../src/modules/entities/entities.model.ts';
/** Formats by type, read with any type name the form holds. */
export const FORMATS_BY_TYPE: Readonly<Record<string, readonly string[] | undefined>> = SERVICE_FORMATS;

export interface FieldDef {
  key: string;
  label: string;
  type: string;
  format: string | null;
  required: boolean;
  options?: string[];
  role: string | null;
}
export interface EntityDefinition {
  id: string;
  key: string;
  name: string;
  archived: boolean;
  fields: FieldDef[];
  duplicate_rule: { match: string[]; action: string } | null;
  pipelines: { name: string; stages: string[] }[];
  duplicate_keys: { status: 'current' | 'recomputing'; done: number; total: number };
  created_at: string;
  updated_at: string;
  /** A PUT's answer: stored values the change may leave unfitting (kept as they are). */
  warnings?: { key: string; reason: string; message?: string }[];
}

// A calendar's weekdays and hours as the service defines them (an import-free module).
import type { Hours, Weekday } from '../../../../src/modules/booking/booking.rules.ts';

export { WEEKDAYS } from '../../../../src/modules/booking/booking.rules.ts';
export type { Hours, Weekday };

export interface Calendar {
  id: string;
  name: string;
  time_zone: string;
  slot_minutes: number;
  buffer_minutes: number;
  min_notice_minutes: number;
  horizon_days: number;
  capacity: number;
  weekly: Record<Weekday, Hours>;
  exceptions: { date: string; hours: Hours }[];
  default: boolean;
  created_at: string;
  updated_at: string;
}

export { WEBHOOK_EVENTS } from '../../../../src/outbound/events.ts';
export interface Webhook {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  failing_since: string | null;
  previous_secret_until: string | null;
  created_at: string;
  updated_at: string;
  secret?: string;
}
export interface WebhookRecovery {
  requeued: number;
  more: boolean;
}
export interface WebhookTestResult {
  message_id: string;
  delivered: boolean;
  status_code: number | null;
  body: string | null;
  error: string | null;
  duration_ms: number;
}
export interface User {
  id: string;
  email: string;
  name: string;
  role: 'owner' | 'admin' | 'member' | 'viewer';
  created_at: string;
  /** A creation with an invitation: until when its emailed link works. */
  invited_until?: string;
}
