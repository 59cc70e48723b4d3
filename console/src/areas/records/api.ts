// The endpoints the records screens read (interface: Record (S2), Entity (S2); decisions §6, §10).
import { useQuery } from '@tanstack/react-query';
import { api } from '../../lib/api.ts';

export interface RecordDocument {
  id: string;
  name: string;
  mime: string;
  size: number;
  field?: string;
  url: string;
}

export interface LeadRecord {
  id: string;
  entity: string;
  name: string;
  fields: Record<string, unknown>;
  source: string;
  external_id?: string | null;
  documents: RecordDocument[];
  created_at: string;
  updated_at: string;
  crm: { pipeline: string; stage: string; entered_at: string } | null;
}

export interface RecordPage {
  records: LeadRecord[];
  next_cursor: string | null;
}

export interface EntityField {
  key: string;
  label: string;
  type: string;
  format: string | null;
  required: boolean;
  options?: string[];
  role: string | null;
}

export interface Entity {
  key: string;
  name: string;
  archived: boolean;
  fields: EntityField[];
}

export interface HistoryEvent {
  id: string;
  type: string;
  message: string;
  data: Record<string, unknown>;
  actor: { type: string; name: string };
  created_at: string;
}

export interface StageStay {
  pipeline: string;
  stage: string;
  entered_at: string;
  left_at: string | null;
  seconds: number;
}

export interface History {
  events: HistoryEvent[];
  stages: StageStay[];
  next_cursor: string | null;
}

export interface Pipelines {
  entities: { key: string; pipelines: { name: string; stages: string[] }[] }[];
}

export function useEntities() {
  return useQuery({
    queryKey: ['entities'],
    queryFn: ({ signal }) => api<{ entities: Entity[]; modules: string[] }>('/api/v1/entities', { signal }),
    staleTime: 60_000,
  });
}

export function usePipelines(enabled: boolean) {
  return useQuery({
    queryKey: ['pipelines'],
    queryFn: ({ signal }) => api<Pipelines>('/api/v1/crm/pipelines', { signal }),
    staleTime: 60_000,
    enabled,
  });
}

/** The value of the field with the email role, if the entity has one. */
export function emailOf(record: LeadRecord, entities: readonly Entity[] | undefined): string {
  const entity = entities?.find((e) => e.key === record.entity);
  const field = entity?.fields.find((f) => f.role === 'email');
  const value = field ? record.fields[field.key] : undefined;
  return typeof value === 'string' ? value : '';
}
