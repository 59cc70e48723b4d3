// One entity field as a form control, by its type (decisions §3), and its value as text.
import { Checkbox, CheckboxGroup, Label } from 'react-aria-components';
import { SelectField, TextField } from '../../ui/fields.tsx';
import type { EntityField } from './api.ts';

/** Form state of a field: text for most types, a list for multiselect. */
export type Draft = string | string[];

function pad(n: number): string {
  return String(n).padStart(2, '0');
}

/** A stored value as the control shows it. */
export function toDraft(field: EntityField, value: unknown): Draft {
  if (field.type === 'multiselect') return Array.isArray(value) ? value.map(String) : [];
  if (value === null || value === undefined) return '';
  if (field.type === 'boolean') return value === true ? 'true' : value === false ? 'false' : '';
  if (field.type === 'datetime' && typeof value === 'string') {
    const at = new Date(value);
    if (Number.isNaN(at.getTime())) return value;
    return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}`;
  }
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/** The control's value as the PATCH sends it; an empty control clears the field (null). */
export function fromDraft(field: EntityField, draft: Draft): unknown {
  if (Array.isArray(draft)) return draft;
  if (draft.trim() === '') return null;
  if (field.type === 'number') {
    const number = Number(draft.replace(',', '.'));
    return Number.isFinite(number) ? number : draft;
  }
  if (field.type === 'boolean') return draft === 'true';
  if (field.type === 'datetime') {
    const at = new Date(draft);
    return Number.isNaN(at.getTime()) ? draft : at.toISOString();
  }
  return draft;
}

export function sameDraft(a: Draft, b: Draft): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export function FieldInput({
  field,
  value,
  onChange,
  error,
  labels,
}: {
  field: EntityField;
  value: Draft;
  onChange(value: Draft): void;
  error?: string | null;
  labels: { yes: string; no: string; notSet: string };
}) {
  const common = { label: field.label, error, isRequired: field.required, name: field.key };
  switch (field.type) {
    case 'textarea':
      return <TextField {...common} multiline value={String(value)} onChange={onChange} />;
    case 'number':
      return <TextField {...common} inputMode="decimal" value={String(value)} onChange={onChange} />;
    case 'date':
      return <TextField {...common} type="date" value={String(value)} onChange={onChange} />;
    case 'datetime':
      return <TextField {...common} type="datetime-local" value={String(value)} onChange={onChange} />;
    case 'boolean':
      return (
        <SelectField
          {...common}
          value={String(value)}
          onChange={onChange}
          options={[
            { id: '', label: labels.notSet },
            { id: 'true', label: labels.yes },
            { id: 'false', label: labels.no },
          ]}
        />
      );
    case 'select':
      return (
        <SelectField
          {...common}
          value={String(value)}
          onChange={onChange}
          options={[
            { id: '', label: labels.notSet },
            ...(field.options ?? []).map((option) => ({ id: option, label: option })),
          ]}
        />
      );
    case 'multiselect':
      return (
        <CheckboxGroup
          className="field checkbox-group"
          value={Array.isArray(value) ? value : []}
          onChange={onChange}
          isInvalid={Boolean(error)}
          name={field.key}
        >
          <Label>{field.label}</Label>
          {(field.options ?? []).map((option) => (
            <Checkbox key={option} value={option} className="checkbox">
              <span className="checkbox-box" aria-hidden="true" />
              {option}
            </Checkbox>
          ))}
          {error ? <span className="error-text">{error}</span> : null}
        </CheckboxGroup>
      );
    default: {
      const type =
        field.format === 'email'
          ? 'email'
          : field.format === 'url'
            ? 'url'
            : field.format === 'phone'
              ? 'tel'
              : 'text';
      return <TextField {...common} type={type} value={String(value)} onChange={onChange} />;
    }
  }
}

/** A value for reading (viewers, history). */
export function displayValue(
  field: EntityField,
  value: unknown,
  labels: { yes: string; no: string },
): string {
  if (value === null || value === undefined || value === '') return '—';
  if (Array.isArray(value)) return value.join(', ');
  if (field.type === 'boolean') return value ? labels.yes : labels.no;
  if (field.type === 'datetime' && typeof value === 'string') return new Date(value).toLocaleString();
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}
