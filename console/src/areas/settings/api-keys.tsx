// API keys (decisions §2, §9): list, create (the value shown once), rename, strict mode, revoke.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Button, Checkbox, CheckboxGroup, Label } from 'react-aria-components';
import { api } from '../../lib/api.ts';
import { useFormat, useT } from '../../lib/i18n.tsx';
import { ErrorText, useDescribeError } from '../../ui/errors.tsx';
import { TextField } from '../../ui/fields.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { type ColumnDef, DataTable } from '../../ui/table.tsx';
import { useToast } from '../../ui/toast.tsx';
import { type ApiKey, type CreatedApiKey, PERMISSIONS } from './api.ts';
import { messages } from './messages.ts';
import { CheckboxField, ConfirmButton, errorsOf, SecretOnce, SettingsNav } from './parts.tsx';

const KEYS = ['settings', 'api-keys'] as const;

export function ApiKeysScreen() {
  const t = useT(messages);
  const format = useFormat();
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const list = useQuery({
    queryKey: KEYS,
    queryFn: ({ signal }) =>
      api<{ api_keys: ApiKey[] }>('/api/v1/settings/api-keys', { query: { limit: 500 }, signal }),
  });
  const [name, setName] = useState('');
  const [strict, setStrict] = useState(false);
  const [permissions, setPermissions] = useState<string[]>([...PERMISSIONS]);
  const [created, setCreated] = useState<CreatedApiKey | null>(null);
  const [editing, setEditing] = useState<string | null>(null);

  const create = useMutation({
    mutationFn: () =>
      api<CreatedApiKey>('/api/v1/settings/api-keys', {
        method: 'POST',
        body: { name: name.trim(), strict, permissions },
      }),
    onSuccess: (key) => {
      setCreated(key);
      setName('');
      setStrict(false);
      setPermissions([...PERMISSIONS]);
      void client.invalidateQueries({ queryKey: KEYS });
    },
  });
  const revoke = useMutation({
    mutationFn: (key: ApiKey) => api(`/api/v1/settings/api-keys/${key.id}`, { method: 'DELETE' }),
    onSuccess: (_, key) => {
      toast.show(t('keyRevoked', { name: key.name }));
      void client.invalidateQueries({ queryKey: KEYS });
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });
  const errors = errorsOf(create.error);

  const columns: ColumnDef<ApiKey>[] = [
    { id: 'name', label: t('name'), render: (k) => k.name, alwaysVisible: true },
    { id: 'prefix', label: t('prefix'), render: (k) => <code>{k.prefix}…</code> },
    { id: 'strict', label: t('strict'), render: (k) => (k.strict ? t('yes') : t('no')) },
    {
      id: 'permissions',
      label: t('permissions'),
      render: (k) =>
        k.permissions.length === PERMISSIONS.length ? t('allPermissions') : k.permissions.join(', '),
    },
    { id: 'created', label: t('created'), render: (k) => format.dateTime(k.created_at) },
    {
      id: 'actions',
      label: t('actions'),
      render: (k) => (
        <div className="row-actions">
          <Button
            className="button secondary"
            aria-label={t('editNamed', { name: k.name })}
            onPress={() => setEditing(k.id)}
          >
            {t('edit')}
          </Button>
          <ConfirmButton
            label={t('revoke')}
            title={t('revokeKeyTitle', { name: k.name })}
            text={t('revokeKeyText')}
            confirmLabel={t('revoke')}
            onConfirm={() => revoke.mutate(k)}
          />
        </div>
      ),
    },
  ];
  const editingKey = list.data?.api_keys.find((k) => k.id === editing);

  return (
    <section>
      <SettingsNav />
      <PageTitle>{t('apiKeys')}</PageTitle>
      <p className="muted">{t('apiKeysIntro')}</p>
      {created ? (
        <SecretOnce
          title={t('newKeyTitle', { name: created.name })}
          value={created.key}
          onDone={() => setCreated(null)}
        >
          <p className="muted small">{t('keyUsage')}</p>
        </SecretOnce>
      ) : null}
      <form
        className="panel form"
        aria-labelledby="create-key"
        onSubmit={(event: FormEvent) => {
          event.preventDefault();
          create.mutate();
        }}
      >
        <h2 id="create-key">{t('createKey')}</h2>
        <TextField label={t('keyName')} value={name} onChange={setName} isRequired error={errors.name} />
        <CheckboxField
          label={t('strictMode')}
          description={t('strictHelp')}
          isSelected={strict}
          onChange={setStrict}
        />
        <CheckboxGroup value={permissions} onChange={setPermissions} className="checkbox-group">
          <Label>{t('permissions')}</Label>
          <div className="checkbox-grid">
            {PERMISSIONS.map((permission) => (
              <Checkbox key={permission} value={permission} className="checkbox">
                <span className="checkbox-box" aria-hidden="true" />
                <code>{permission}</code>
              </Checkbox>
            ))}
          </div>
        </CheckboxGroup>
        {errors.permissions ? <p className="error-text">{errors.permissions}</p> : null}
        <ErrorText error={create.error && Object.keys(errors).length === 0 ? create.error : null} />
        <div>
          <Button
            type="submit"
            className="button primary"
            isDisabled={create.isPending || name.trim() === ''}
          >
            {t('createKey')}
          </Button>
        </div>
      </form>
      {editingKey ? (
        <EditKey key={editingKey.id} apiKey={editingKey} onClose={() => setEditing(null)} />
      ) : null}
      <h2>{t('activeKeys')}</h2>
      {list.isPending ? <Loading /> : null}
      <ErrorText error={list.error} />
      {list.data ? (
        <DataTable
          label={t('activeKeys')}
          columns={columns}
          rows={list.data.api_keys}
          rowId={(k) => k.id}
          empty={t('noKeys')}
        />
      ) : null}
    </section>
  );
}

function EditKey({ apiKey, onClose }: { apiKey: ApiKey; onClose(): void }) {
  const t = useT(messages);
  const toast = useToast();
  const client = useQueryClient();
  const [name, setName] = useState(apiKey.name);
  const [strict, setStrict] = useState(apiKey.strict);
  const save = useMutation({
    mutationFn: () =>
      api<ApiKey>(`/api/v1/settings/api-keys/${apiKey.id}`, {
        method: 'PATCH',
        body: { name: name.trim(), strict },
      }),
    onSuccess: () => {
      toast.show(t('saved'));
      void client.invalidateQueries({ queryKey: KEYS });
      onClose();
    },
  });
  const errors = errorsOf(save.error);
  return (
    <form
      className="panel form"
      aria-labelledby="edit-key"
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <h2 id="edit-key">{t('editKeyTitle', { name: apiKey.name })}</h2>
      <TextField
        label={t('keyName')}
        value={name}
        onChange={setName}
        isRequired
        error={errors.name}
        autoFocus
      />
      <CheckboxField label={t('strictMode')} isSelected={strict} onChange={setStrict} />
      <ErrorText error={save.error && Object.keys(errors).length === 0 ? save.error : null} />
      <div className="form-actions">
        <Button type="submit" className="button primary" isDisabled={save.isPending}>
          {t('save')}
        </Button>
        <Button className="button secondary" onPress={onClose}>
          {t('cancel')}
        </Button>
      </div>
    </form>
  );
}
