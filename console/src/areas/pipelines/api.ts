// The settings endpoints this area uses: entity definitions (pipelines are part of the entity,
// PUT /api/v1/settings/entities/{key}) and automations (/api/v1/settings/automations, decisions §7).
import { api } from '../../lib/api.ts';

export interface SettingsField {
  key: string;
  label: string;
  type: string;
  format: string | null;
  required: boolean;
  options?: string[];
  role: string | null;
}

export interface PipelineDef {
  name: string;
  stages: string[];
}

export interface SettingsEntity {
  id: string;
  key: string;
  name: string;
  archived: boolean;
  fields: SettingsField[];
  duplicate_rule: { match: string[]; action: string } | null;
  pipelines: PipelineDef[];
}

export const ACTION_TYPES = ['webhook', 'email', 'note', 'distribute', 'move_stage'] as const;
export type ActionType = (typeof ACTION_TYPES)[number];

export interface AutomationAction {
  type: ActionType;
  url?: string;
  to?: string;
  subject?: string;
  body?: string;
  record_token_fields?: string[];
  record_token_days?: number;
  pipeline?: string;
  stage?: string;
}

export interface Automation {
  id: string;
  name: string;
  entity: string;
  pipeline: string;
  stage: string;
  action: AutomationAction;
  enabled: boolean;
  created_at: string;
  updated_at: string;
  secret?: string;
}

export interface AutomationInput {
  name: string;
  entity: string;
  pipeline?: string;
  stage: string;
  action: AutomationAction;
  enabled: boolean;
}

export const SETTINGS_ENTITIES_KEY = ['settings-entities'] as const;
export const AUTOMATIONS_KEY = ['settings-automations'] as const;

export function fetchSettingsEntities(signal?: AbortSignal) {
  return api<{ entities: SettingsEntity[] }>('/api/v1/settings/entities', { signal });
}

/**
 * Replaces the entity's pipelines and keeps the rest of its definition as it is: the PUT takes
 * the whole definition, so the fields and the duplicate rule go back as they were read.
 */
export function putPipelines(entity: SettingsEntity, pipelines: PipelineDef[]) {
  return api<SettingsEntity>(`/api/v1/settings/entities/${encodeURIComponent(entity.key)}`, {
    method: 'PUT',
    body: {
      name: entity.name,
      fields: entity.fields.map((field) => ({
        key: field.key,
        label: field.label,
        type: field.type,
        format: field.format,
        required: field.required,
        ...(field.options ? { options: field.options } : {}),
        role: field.role,
      })),
      duplicate_rule: entity.duplicate_rule,
      pipelines,
      archived: entity.archived,
    },
  });
}

export async function fetchAllAutomations(signal?: AbortSignal): Promise<Automation[]> {
  const all: Automation[] = [];
  let cursor: string | null = null;
  // The list is oldest first, 100 at a time; an account has a handful.
  do {
    const page: { automations: Automation[]; next_cursor: string | null } = await api(
      '/api/v1/settings/automations',
      {
        query: { limit: 100, cursor },
        signal,
      },
    );
    all.push(...page.automations);
    cursor = page.next_cursor;
  } while (cursor && all.length < 2000);
  return all;
}

export function createAutomation(input: AutomationInput) {
  return api<Automation>('/api/v1/settings/automations', { method: 'POST', body: input });
}

export function updateAutomation(id: string, input: AutomationInput) {
  return api<Automation>(`/api/v1/settings/automations/${encodeURIComponent(id)}`, {
    method: 'PATCH',
    body: input,
  });
}

export function deleteAutomation(id: string) {
  return api<void>(`/api/v1/settings/automations/${encodeURIComponent(id)}`, { method: 'DELETE' });
}
