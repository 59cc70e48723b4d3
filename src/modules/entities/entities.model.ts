/** Entity definitions as the rest of the service uses them (decisions §3). */

export const FIELD_TYPES = [
  'text',
  'textarea',
  'number',
  'boolean',
  'date',
  'datetime',
  'select',
  'multiselect',
  'file',
  'files',
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

export const FORMATS_BY_TYPE: Partial<Record<FieldType, readonly string[]>> = {
  text: ['email', 'phone', 'url', 'postal_code', 'iban'],
  number: ['integer', 'decimal', 'currency', 'percent'],
};

export const ROLES = ['email', 'phone', 'first_name', 'last_name', 'company'] as const;
export type Role = (typeof ROLES)[number];

export const DUPLICATE_ACTIONS = ['update', 'ignore', 'create'] as const;
export type DuplicateAction = (typeof DUPLICATE_ACTIONS)[number];

export interface FieldDef {
  key: string;
  label: string;
  type: FieldType;
  format: string | null;
  required: boolean;
  options: string[] | null;
  role: Role | null;
}

export interface DuplicateRule {
  match: string[];
  action: DuplicateAction;
}

export interface StageDef {
  id: string;
  name: string;
}

export interface PipelineDef {
  id: string;
  name: string;
  stages: StageDef[];
}

export interface EntityDef {
  id: string;
  key: string;
  name: string;
  archived: boolean;
  fields: FieldDef[];
  duplicateRule: DuplicateRule | null;
  /** Active pipelines in order, each with its active stages in order. */
  pipelines: PipelineDef[];
  /** The stored duplicate keys: being recomputed after a rule change, and how far. */
  duplicateKeys: { recomputing: boolean; done: number; total: number };
  createdAt: Date;
  updatedAt: Date;
}

export function fieldByRole(entity: EntityDef, role: Role): FieldDef | undefined {
  return entity.fields.find((field) => field.role === role);
}

export function isFileType(type: FieldType): boolean {
  return type === 'file' || type === 'files';
}
