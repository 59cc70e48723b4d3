import { iso } from '../../http/schemas.ts';
import { escapeHtml } from '../../lib/text.ts';
import type { EmailContent } from '../../outbound/mail-sender.ts';
import { textOf } from '../crm/templates.ts';
import type { EntityDef, FieldDef } from '../entities/entities.model.ts';

/** What a partner receives of a record (decisions §8). */
export interface DeliveredRecord {
  id: string;
  entity: string;
  name: string;
  fields: Record<string, unknown>;
  source: string;
  created_at: Date | string;
}

/** The webhook type of a delivery and of a test delivery (the same body, so a receiver can be tested). */
export const DELIVERY_WEBHOOK_TYPE = 'record.delivered';

/** `data` of a `record.delivered` webhook. */
export function deliveryWebhookData(
  deliveryId: string,
  record: DeliveredRecord,
  price: { priceCents: number; currency: string },
) {
  return {
    delivery_id: deliveryId,
    record: {
      id: record.id,
      entity: record.entity,
      name: record.name,
      fields: record.fields,
      source: record.source,
      created_at: iso(record.created_at),
    },
    price_cents: price.priceCents,
    currency: price.currency,
  };
}

function shownValue(_field: FieldDef, value: unknown): string {
  if (typeof value === 'boolean') return value ? 'Yes' : 'No';
  return textOf(value);
}

/**
 * The email of a delivery: subject `New lead: <name>`, the fields with a value listed by their
 * labels in a text and an HTML part (values escaped), and the delivery id.
 */
export function deliveryEmail(
  to: string,
  deliveryId: string,
  entity: EntityDef,
  record: DeliveredRecord,
): EmailContent {
  const rows = entity.fields
    .map((field) => ({ label: field.label, value: shownValue(field, record.fields[field.key]) }))
    .filter((row) => row.value !== '');
  const name = record.name.replace(/[\r\n]+/g, ' ').trim() || record.id;
  const text = [
    `New lead: ${name}`,
    '',
    ...rows.map((row) => `${row.label}: ${row.value}`),
    '',
    `Record: ${record.id}`,
    `Delivery: ${deliveryId}`,
  ].join('\n');
  const html = [
    `<h1>New lead: ${escapeHtml(name)}</h1>`,
    '<table>',
    ...rows.map(
      (row) => `<tr><th align="left">${escapeHtml(row.label)}</th><td>${escapeHtml(row.value)}</td></tr>`,
    ),
    '</table>',
    `<p>Record: ${escapeHtml(record.id)}<br>Delivery: ${escapeHtml(deliveryId)}</p>`,
  ].join('\n');
  return { to: [to], subject: `New lead: ${name}`, text, html };
}

/** An invented value of a field's type, for a test delivery. */
function exampleValue(field: FieldDef): unknown {
  switch (field.type) {
    case 'number':
      return field.format === 'integer' ? 3 : field.format === 'percent' ? 12.5 : 1500;
    case 'boolean':
      return true;
    case 'date':
      return '2030-01-15';
    case 'datetime':
      return '2030-01-15T10:30:00.000Z';
    case 'select':
      return field.options?.[0] ?? 'Example';
    case 'multiselect':
      return field.options?.slice(0, 2) ?? [];
    case 'file':
    case 'files':
      return undefined;
    default:
      break;
  }
  switch (field.role ?? field.format) {
    case 'first_name':
      return 'Erika';
    case 'last_name':
      return 'Mustermann';
    case 'company':
      return 'Example Ltd';
    case 'email':
      return 'erika.mustermann@example.com';
    case 'phone':
      return '+49 30 1234567';
    case 'url':
      return 'https://example.com';
    case 'postal_code':
      return '10115';
    case 'iban':
      return 'DE89370400440532013000';
    default:
      return field.type === 'textarea' ? `Example ${field.label}\nsecond line` : `Example ${field.label}`;
  }
}

/** An invented record of the entity, one plausible value per field (files have none). */
export function inventedRecord(entity: EntityDef, id: string): DeliveredRecord {
  const fields: Record<string, unknown> = {};
  for (const field of entity.fields) {
    const value = exampleValue(field);
    if (value !== undefined) fields[field.key] = value;
  }
  const first = entity.fields.find((f) => f.role === 'first_name');
  const last = entity.fields.find((f) => f.role === 'last_name');
  const name =
    [first && fields[first.key], last && fields[last.key]].filter(Boolean).join(' ') || 'Test record';
  return { id, entity: entity.key, name, fields, source: 'test', created_at: new Date() };
}
