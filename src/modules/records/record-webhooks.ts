import { iso } from '../../http/schemas.ts';

/**
 * The `data` of `record.created` and `record.updated` webhooks: the record as the API shows it.
 * The one-statement creations build the same object in SQL (records.repo.ts, `recordCreatedOutbox`).
 */
export function recordEventData(
  entityKey: string,
  row: {
    id: string;
    name: string;
    fields: Record<string, unknown>;
    source: string;
    created_at: Date;
    updated_at: Date;
  },
) {
  return {
    record: {
      id: row.id,
      entity: entityKey,
      name: row.name,
      fields: row.fields,
      source: row.source,
      created_at: iso(row.created_at),
      updated_at: iso(row.updated_at),
    },
  };
}
