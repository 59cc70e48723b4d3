// Entities and fields (decisions §3): list, create, edit fields, duplicate rule and archiving
// through PUT /api/v1/settings/entities/{key}. The entity's pipelines are sent back as read
// (another screen edits them); the service's 422 details are shown next to the fields.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Button } from 'react-aria-components';
import { Link, useNavigate, useParams } from 'react-router';
import { ApiError, api } from '../../lib/api.ts';
import { useFormat, useT } from '../../lib/i18n.tsx';
import { DetailList, ErrorText } from '../../ui/errors.tsx';
import { SelectField, TextField } from '../../ui/fields.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { type ColumnDef, DataTable } from '../../ui/table.tsx';
import { useToast } from '../../ui/toast.tsx';
import {
  DUPLICATE_ACTIONS,
  type EntityDefinition,
  FIELD_ROLES,
  FIELD_TYPES,
  type FieldDef,
  FORMATS_BY_TYPE,
} from './api.ts';
import { messages } from './messages.ts';
import { CheckboxField, errorsOf, lines, SettingsNav } from './parts.tsx';

const ENTITIES = ['settings', 'entities'] as const;

export function EntitiesScreen() {
  const t = useT(messages);
  const format = useFormat();
  const navigate = useNavigate();
  const client = useQueryClient();
  const list = useQuery({
    queryKey: ENTITIES,
    queryFn: ({ signal }) => api<{ entities: EntityDefinition[] }>('/api/v1/settings/entities', { signal }),
  });
  const [key, setKey] = useState('');
  const [name, setName] = useState('');
  const [taken, setTaken] = useState(false);
  const create = useMutation({
    mutationFn: async () => {
      // PUT creates or replaces: a key in use would replace that entity, so it is refused here.
      if (list.data?.entities.some((e) => e.key === key.trim())) {
        setTaken(true);
        return null;
      }
      setTaken(false);
      return api<EntityDefinition>(`/api/v1/settings/entities/${encodeURIComponent(key.trim())}`, {
        method: 'PUT',
        body: { name: name.trim(), fields: [] },
      });
    },
    onSuccess: (entity) => {
      if (!entity) return;
      void client.invalidateQueries({ queryKey: ENTITIES });
      void navigate(`/settings/entities/${entity.key}`);
    },
  });
  const errors = errorsOf(create.error);
  const keyError =
    (taken ? t('entityKeyTaken') : null) ??
    (create.error instanceof ApiError && create.error.status === 422 && !errors.name
      ? t('entityKeyInvalid')
      : null);
  const columns: ColumnDef<EntityDefinition>[] = [
    {
      id: 'name',
      label: t('name'),
      render: (e) => <Link to={`/settings/entities/${e.key}`}>{e.name}</Link>,
      alwaysVisible: true,
    },
    { id: 'key', label: t('key'), render: (e) => <code>{e.key}</code> },
    { id: 'fields', label: t('fields'), render: (e) => format.number(e.fields.length) },
    { id: 'archived', label: t('status'), render: (e) => (e.archived ? t('archived') : t('active')) },
    { id: 'updated', label: t('updated'), render: (e) => format.dateTime(e.updated_at) },
  ];
  return (
    <section>
      <SettingsNav />
      <PageTitle>{t('entities')}</PageTitle>
      <p className="muted">{t('entitiesIntro')}</p>
      {list.isPending ? <Loading /> : null}
      <ErrorText error={list.error} />
      {list.data ? (
        <DataTable
          label={t('entities')}
          columns={columns}
          rows={list.data.entities}
          rowId={(e) => e.id}
          empty={t('noEntities')}
        />
      ) : null}
      <form
        className="panel form"
        aria-labelledby="create-entity"
        onSubmit={(event) => {
          event.preventDefault();
          create.mutate();
        }}
      >
        <h2 id="create-entity">{t('createEntity')}</h2>
        <div className="grid-2">
          <TextField
            label={t('entityKey')}
            value={key}
            onChange={setKey}
            isRequired
            description={t('entityKeyHelp')}
            error={keyError}
          />
          <TextField label={t('entityName')} value={name} onChange={setName} isRequired error={errors.name} />
        </div>
        <div>
          <Button
            type="submit"
            className="button primary"
            isDisabled={create.isPending || key.trim() === '' || name.trim() === ''}
          >
            {t('createEntity')}
          </Button>
        </div>
      </form>
    </section>
  );
}

interface FieldDraft {
  /** A stable id for React while keys are edited. */
  uid: number;
  key: string;
  label: string;
  type: string;
  format: string;
  required: boolean;
  options: string;
  role: string;
}

let uidCounter = 0;
function draftOf(field: FieldDef): FieldDraft {
  return {
    uid: ++uidCounter,
    key: field.key,
    label: field.label,
    type: field.type,
    format: field.format ?? '',
    required: field.required,
    options: (field.options ?? []).join('\n'),
    role: field.role ?? '',
  };
}

function fieldOf(draft: FieldDraft) {
  const isSelect = draft.type === 'select' || draft.type === 'multiselect';
  return {
    key: draft.key.trim(),
    label: draft.label.trim(),
    type: draft.type,
    format: draft.format === '' ? null : draft.format,
    required: draft.required,
    ...(isSelect ? { options: lines(draft.options) } : {}),
    role: draft.role === '' ? null : draft.role,
  };
}

export function EntityScreen() {
  const t = useT(messages);
  const { key = '' } = useParams();
  const entity = useQuery({
    queryKey: [...ENTITIES, key],
    queryFn: ({ signal }) =>
      api<EntityDefinition>(`/api/v1/settings/entities/${encodeURIComponent(key)}`, { signal }),
  });
  if (entity.isError) throw entity.error;
  return (
    <section>
      <SettingsNav />
      <PageTitle>{entity.data ? t('entityTitle', { name: entity.data.name }) : t('entities')}</PageTitle>
      <p>
        <Link to="/settings/entities">{t('backToEntities')}</Link>
      </p>
      {entity.data ? <EntityEditor key={entity.data.updated_at} entity={entity.data} /> : <Loading />}
    </section>
  );
}

function EntityEditor({ entity }: { entity: EntityDefinition }) {
  const t = useT(messages);
  const toast = useToast();
  const client = useQueryClient();
  const [name, setName] = useState(entity.name);
  const [archived, setArchived] = useState(entity.archived);
  const [fields, setFields] = useState<FieldDraft[]>(() => entity.fields.map(draftOf));
  const [match, setMatch] = useState<string[]>(entity.duplicate_rule?.match ?? []);
  const [action, setAction] = useState<string>(entity.duplicate_rule?.action ?? 'update');

  const save = useMutation({
    mutationFn: () =>
      api<EntityDefinition>(`/api/v1/settings/entities/${encodeURIComponent(entity.key)}`, {
        method: 'PUT',
        body: {
          name: name.trim(),
          fields: fields.map(fieldOf),
          duplicate_rule: match.length > 0 ? { match, action } : null,
          // Edited on the pipelines screen: sent back unchanged.
          pipelines: entity.pipelines,
          archived,
        },
      }),
    onSuccess: ({ warnings, ...saved }) => {
      toast.show(t('saved'));
      // Values stored before the change are kept; the service counts those that may not fit.
      for (const warning of warnings ?? []) {
        const index = Number(/^fields\.(\d+)\./.exec(warning.key)?.[1]);
        const field = saved.fields[index];
        if (!field) continue;
        if (warning.reason === 'values_kept') toast.show(t('valuesKept', { field: field.label }), 'info');
        if (warning.reason === 'values_missing')
          toast.show(t('valuesMissing', { field: field.label }), 'info');
      }
      client.setQueryData([...ENTITIES, entity.key], saved);
      void client.invalidateQueries({ queryKey: ENTITIES });
      void client.invalidateQueries({ queryKey: ['entities'] });
    },
  });
  const errors = errorsOf(save.error);
  const fieldError = (index: number, part: string) => errors[`fields.${index}.${part}`] ?? null;
  const generalErrors = Object.entries(errors).filter(
    ([k]) => !/^fields\.\d+\.(key|label|type|format|required|options|role)$/.test(k) && k !== 'name',
  );
  const update = (uid: number, patch: Partial<FieldDraft>) =>
    setFields((list) => list.map((f) => (f.uid === uid ? { ...f, ...patch } : f)));
  const move = (index: number, by: number) =>
    setFields((list) => {
      const next = [...list];
      const [item] = next.splice(index, 1);
      next.splice(index + by, 0, item!);
      return next;
    });
  const matchable = fields.filter(
    (f) => f.key.trim() !== '' && !['file', 'files', 'multiselect'].includes(f.type),
  );
  const typeOptions = FIELD_TYPES.map((type) => ({ id: type, label: t(`type.${type}`) }));
  const roleOptions = [
    { id: '', label: t('noRole') },
    ...FIELD_ROLES.map((r) => ({ id: r, label: t(`role.${r}`) })),
  ];

  return (
    <form
      className="form"
      aria-label={t('entityTitle', { name: entity.name })}
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <div className="panel form">
        <div className="grid-2">
          <TextField label={t('entityKey')} value={entity.key} onChange={() => {}} isReadOnly />
          <TextField label={t('entityName')} value={name} onChange={setName} isRequired error={errors.name} />
        </div>
        <CheckboxField
          label={t('archiveEntity')}
          description={t('archiveHelp')}
          isSelected={archived}
          onChange={setArchived}
        />
        {entity.duplicate_keys.status === 'recomputing' ? (
          <p className="muted" role="status">
            {t('recomputing', { done: entity.duplicate_keys.done, total: entity.duplicate_keys.total })}
          </p>
        ) : null}
      </div>

      <h2>{t('fields')}</h2>
      {fields.length === 0 ? <p className="muted">{t('noFields')}</p> : null}
      <ol className="field-list">
        {fields.map((field, index) => {
          const formats = FORMATS_BY_TYPE[field.type] ?? [];
          const isSelect = field.type === 'select' || field.type === 'multiselect';
          const legend = field.label || field.key || t('newField');
          return (
            <li key={field.uid}>
              <fieldset className="panel field-editor">
                <legend>{t('fieldNumbered', { n: index + 1, name: legend })}</legend>
                <div className="field-grid">
                  <TextField
                    label={t('fieldKey')}
                    value={field.key}
                    onChange={(value) => update(field.uid, { key: value })}
                    isRequired
                    error={fieldError(index, 'key')}
                  />
                  <TextField
                    label={t('fieldLabel')}
                    value={field.label}
                    onChange={(value) => update(field.uid, { label: value })}
                    isRequired
                    error={fieldError(index, 'label')}
                  />
                  <SelectField
                    label={t('fieldType')}
                    value={field.type}
                    onChange={(value) =>
                      update(field.uid, {
                        type: value,
                        format: (FORMATS_BY_TYPE[value] ?? []).includes(field.format) ? field.format : '',
                        role: value === 'text' ? field.role : '',
                      })
                    }
                    options={typeOptions}
                    error={fieldError(index, 'type')}
                  />
                  <SelectField
                    label={t('fieldFormat')}
                    value={field.format}
                    onChange={(value) => update(field.uid, { format: value })}
                    options={[
                      { id: '', label: t('noFormat') },
                      ...formats.map((f) => ({ id: f, label: t(`format.${f}` as 'format.email') })),
                    ]}
                    isDisabled={formats.length === 0}
                    error={fieldError(index, 'format')}
                  />
                  <SelectField
                    label={t('fieldRole')}
                    value={field.role}
                    onChange={(value) => update(field.uid, { role: value })}
                    options={roleOptions}
                    isDisabled={field.type !== 'text'}
                    error={fieldError(index, 'role')}
                  />
                  <CheckboxField
                    label={t('fieldRequired')}
                    isSelected={field.required}
                    onChange={(value) => update(field.uid, { required: value })}
                  />
                </div>
                {isSelect ? (
                  <TextField
                    label={t('fieldOptions')}
                    multiline
                    value={field.options}
                    onChange={(value) => update(field.uid, { options: value })}
                    description={t('fieldOptionsHelp')}
                    error={fieldError(index, 'options')}
                  />
                ) : null}
                <div className="form-actions">
                  <Button
                    className="button secondary"
                    isDisabled={index === 0}
                    onPress={() => move(index, -1)}
                    aria-label={t('moveUpNamed', { name: legend })}
                  >
                    {t('moveUp')}
                  </Button>
                  <Button
                    className="button secondary"
                    isDisabled={index === fields.length - 1}
                    onPress={() => move(index, 1)}
                    aria-label={t('moveDownNamed', { name: legend })}
                  >
                    {t('moveDown')}
                  </Button>
                  <Button
                    className="button danger"
                    onPress={() => setFields((list) => list.filter((f) => f.uid !== field.uid))}
                    aria-label={t('removeFieldNamed', { name: legend })}
                  >
                    {t('removeField')}
                  </Button>
                </div>
              </fieldset>
            </li>
          );
        })}
      </ol>
      <div>
        <Button
          className="button secondary"
          onPress={() =>
            setFields((list) => [
              ...list,
              {
                uid: ++uidCounter,
                key: '',
                label: '',
                type: 'text',
                format: '',
                required: false,
                options: '',
                role: '',
              },
            ])
          }
        >
          {t('addField')}
        </Button>
      </div>

      <section className="panel form" aria-labelledby="duplicate-rule">
        <h2 id="duplicate-rule">{t('duplicateRule')}</h2>
        <p className="muted">{t('duplicateRuleHelp')}</p>
        <fieldset className="plain-fieldset">
          <legend>{t('duplicateMatch')}</legend>
          <div className="checkbox-grid">
            {matchable.map((field) => (
              <CheckboxField
                key={field.uid}
                label={field.label || field.key}
                isSelected={match.includes(field.key.trim())}
                onChange={(on) =>
                  setMatch((list) =>
                    on ? [...list, field.key.trim()] : list.filter((k) => k !== field.key.trim()),
                  )
                }
              />
            ))}
          </div>
        </fieldset>
        {errors['duplicate_rule.match'] ? (
          <p className="error-text">{errors['duplicate_rule.match']}</p>
        ) : null}
        <SelectField
          label={t('duplicateAction')}
          value={action}
          onChange={setAction}
          options={DUPLICATE_ACTIONS.map((a) => ({ id: a, label: t(`action.${a}`) }))}
          isDisabled={match.length === 0}
          error={errors['duplicate_rule.action']}
        />
      </section>

      <DetailList details={generalErrors} />
      <ErrorText error={save.error && Object.keys(errors).length === 0 ? save.error : null} />
      {save.error && Object.keys(errors).length > 0 ? (
        <p className="error-text" role="alert">
          {t('fixErrors')}
        </p>
      ) : null}
      <div className="sticky-actions">
        <Button type="submit" className="button primary" isDisabled={save.isPending}>
          {t('saveEntity')}
        </Button>
      </div>
    </form>
  );
}
