// The CRM endpoints the board reads and calls (interface: S2 CRM module; decisions §7).
import { api } from '../../lib/api.ts';

export interface PipelineList {
  entities: { key: string; pipelines: { name: string; stages: string[] }[] }[];
}

export interface EntityField {
  key: string;
  label: string;
  type: string;
  role?: string | null;
}

export interface EntityList {
  entities: { key: string; name: string; archived: boolean; fields: EntityField[] }[];
  modules: string[];
}

export interface BoardRecord {
  id: string;
  entity: string;
  name: string;
  fields: Record<string, unknown>;
  source: string | null;
  created_at: string;
  updated_at: string;
  crm?: { pipeline: string; stage: string; entered_at?: string } | null;
}

export interface BoardPage {
  records: BoardRecord[];
  next_cursor: string | null;
}

export interface StageMoveAnswer {
  id: string;
  crm: { pipeline: string; stage: string; entered_at: string };
  previous: string | null;
}

/** Cards per column page. */
export const COLUMN_PAGE = 25;

export function fetchPipelines(signal?: AbortSignal) {
  return api<PipelineList>('/api/v1/crm/pipelines', { signal });
}

export function fetchEntities(signal?: AbortSignal) {
  return api<EntityList>('/api/v1/entities', { signal });
}

/** One page of a column: the records of the entity in this pipeline and stage, newest first. */
export function fetchColumn(
  target: { entity: string; pipeline: string; stage: string },
  cursor: string | null,
  signal?: AbortSignal,
) {
  return api<BoardPage>('/api/v1/records', {
    query: { ...target, order: 'newest', limit: COLUMN_PAGE, cursor },
    signal,
  });
}

/** The stage move: the same call an integration makes (and S1's status change). */
export function moveRecord(id: string, target: { pipeline: string; stage: string }) {
  return api<StageMoveAnswer>(`/api/v1/crm/records/${encodeURIComponent(id)}/stage`, {
    method: 'POST',
    body: target,
  });
}
