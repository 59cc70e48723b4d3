// Sources (decisions §2, §13): list, create (token shown once), rotate and revoke the token,
// website-form settings, and a copy-paste HTML form for the source's intake address.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Button } from 'react-aria-components';
import { Link, useParams } from 'react-router';
import { api } from '../../lib/api.ts';
import { useFormat, useT } from '../../lib/i18n.tsx';
import { ErrorText, useDescribeError } from '../../ui/errors.tsx';
import { SelectField, TextField } from '../../ui/fields.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { type ColumnDef, DataTable } from '../../ui/table.tsx';
import { useToast } from '../../ui/toast.tsx';
import type { FieldDef, NewToken, Source } from './api.ts';
import { formSnippet } from './form-snippet.ts';
import { messages } from './messages.ts';
import { ConfirmButton, errorsOf, lines, SecretOnce, SettingsNav } from './parts.tsx';

const SOURCES = ['settings', 'sources'] as const;

/** A token just issued, kept only in memory for the page that showed it. */
let freshToken: { sourceId: string; token: NewToken } | null = null;

export function SourcesScreen() {
  const t = useT(messages);
  const format = useFormat();
  const client = useQueryClient();
  const list = useQuery({
    queryKey: SOURCES,
    queryFn: ({ signal }) =>
      api<{ sources: Source[] }>('/api/v1/settings/sources', { query: { limit: 500 }, signal }),
  });
  const [name, setName] = useState('');
  const [created, setCreated] = useState<(Source & NewToken) | null>(null);
  const create = useMutation({
    mutationFn: () =>
      api<Source & NewToken>('/api/v1/settings/sources', { method: 'POST', body: { name: name.trim() } }),
    onSuccess: (source) => {
      setCreated(source);
      setName('');
      void client.invalidateQueries({ queryKey: SOURCES });
    },
  });
  const errors = errorsOf(create.error);
  const columns: ColumnDef<Source>[] = [
    {
      id: 'name',
      label: t('name'),
      render: (s) => <Link to={`/settings/sources/${s.id}`}>{s.name}</Link>,
      alwaysVisible: true,
    },
    {
      id: 'token',
      label: t('token'),
      render: (s) => (s.token_prefix ? <code>{s.token_prefix}…</code> : t('tokenRevoked')),
    },
    {
      id: 'origins',
      label: t('allowedOrigins'),
      render: (s) => (s.allowed_origins.length === 0 ? t('anyOrigin') : s.allowed_origins.join(', ')),
    },
    { id: 'created', label: t('created'), render: (s) => format.dateTime(s.created_at) },
  ];
  return (
    <section>
      <SettingsNav />
      <PageTitle>{t('sources')}</PageTitle>
      <p className="muted">{t('sourcesIntro')}</p>
      {created ? (
        <SecretOnce
          title={t('newTokenTitle', { name: created.name })}
          value={created.token}
          onDone={() => setCreated(null)}
        >
          <FormSnippet action={created.intake_url} honeypot={created.honeypot_field} />
          <p>
            <Link to={`/settings/sources/${created.id}`}>{t('formSettingsOf', { name: created.name })}</Link>
          </p>
        </SecretOnce>
      ) : null}
      <form
        className="panel form"
        aria-labelledby="create-source"
        onSubmit={(event) => {
          event.preventDefault();
          create.mutate();
        }}
      >
        <h2 id="create-source">{t('createSource')}</h2>
        <TextField label={t('sourceName')} value={name} onChange={setName} isRequired error={errors.name} />
        <ErrorText error={create.error && !errors.name ? create.error : null} />
        <div>
          <Button
            type="submit"
            className="button primary"
            isDisabled={create.isPending || name.trim() === ''}
          >
            {t('createSource')}
          </Button>
        </div>
      </form>
      <h2>{t('sources')}</h2>
      {list.isPending ? <Loading /> : null}
      <ErrorText error={list.error} />
      {list.data ? (
        <DataTable
          label={t('sources')}
          columns={columns}
          rows={list.data.sources}
          rowId={(s) => s.id}
          empty={t('noSources')}
        />
      ) : null}
    </section>
  );
}

export function SourceScreen() {
  const t = useT(messages);
  const { id = '' } = useParams();
  const source = useQuery({
    queryKey: [...SOURCES, id],
    queryFn: ({ signal }) => api<Source>(`/api/v1/settings/sources/${id}`, { signal }),
  });
  if (source.isError) throw source.error;
  return (
    <section>
      <SettingsNav />
      <PageTitle>{source.data ? t('sourceTitle', { name: source.data.name }) : t('sources')}</PageTitle>
      <p>
        <Link to="/settings/sources">{t('backToSources')}</Link>
      </p>
      {source.data ? <SourceDetail key={source.data.id} source={source.data} /> : <Loading />}
    </section>
  );
}

function SourceDetail({ source }: { source: Source }) {
  const t = useT(messages);
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const [token, setToken] = useState<NewToken | null>(() =>
    freshToken?.sourceId === source.id ? freshToken.token : null,
  );
  const [form, setForm] = useState({
    name: source.name,
    success_url: source.success_url ?? '',
    error_url: source.error_url ?? '',
    allowed_origins: source.allowed_origins.join('\n'),
    honeypot_field: source.honeypot_field ?? '',
    rate_limit_per_minute: String(source.rate_limit_per_minute),
  });
  const set = (key: keyof typeof form) => (value: string) => setForm((f) => ({ ...f, [key]: value }));
  const refresh = () => void client.invalidateQueries({ queryKey: SOURCES });
  const save = useMutation({
    mutationFn: () =>
      api<Source>(`/api/v1/settings/sources/${source.id}`, {
        method: 'PATCH',
        body: {
          name: form.name.trim(),
          success_url: form.success_url.trim() || null,
          error_url: form.error_url.trim() || null,
          allowed_origins: lines(form.allowed_origins),
          honeypot_field: form.honeypot_field.trim() || null,
          rate_limit_per_minute:
            form.rate_limit_per_minute.trim() === '' ? undefined : Number(form.rate_limit_per_minute),
        },
      }),
    onSuccess: (saved) => {
      toast.show(t('saved'));
      client.setQueryData([...SOURCES, source.id], saved);
      refresh();
    },
  });
  const rotate = useMutation({
    mutationFn: () => api<NewToken>(`/api/v1/settings/sources/${source.id}/token`, { method: 'POST' }),
    onSuccess: (issued) => {
      freshToken = { sourceId: source.id, token: issued };
      setToken(issued);
      void client.invalidateQueries({ queryKey: [...SOURCES, source.id] });
      refresh();
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });
  const revoke = useMutation({
    mutationFn: () => api(`/api/v1/settings/sources/${source.id}/token`, { method: 'DELETE' }),
    onSuccess: () => {
      freshToken = null;
      setToken(null);
      toast.show(t('tokenRevokedDone'));
      void client.invalidateQueries({ queryKey: [...SOURCES, source.id] });
      refresh();
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });
  const errors = errorsOf(save.error);
  const originError = Object.entries(errors).find(([key]) => key.startsWith('allowed_origins'))?.[1];
  const shownHoneypot = source.honeypot_field;

  return (
    <>
      <section className="panel" aria-labelledby="token-title">
        <h2 id="token-title">{t('token')}</h2>
        <p>
          {source.token_prefix ? (
            <>
              {t('activeToken')} <code>{source.token_prefix}…</code>
            </>
          ) : (
            t('noActiveToken')
          )}
        </p>
        <div className="form-actions">
          <ConfirmButton
            label={source.token_prefix ? t('rotateToken') : t('issueToken')}
            title={t('rotateTitle')}
            text={t('rotateText')}
            confirmLabel={source.token_prefix ? t('rotateToken') : t('issueToken')}
            danger={false}
            onConfirm={() => rotate.mutate()}
          />
          <ConfirmButton
            label={t('revokeToken')}
            title={t('revokeTokenTitle')}
            text={t('revokeTokenText')}
            confirmLabel={t('revokeToken')}
            isDisabled={!source.token_prefix}
            onConfirm={() => revoke.mutate()}
          />
        </div>
      </section>
      {token ? (
        <SecretOnce
          title={t('newTokenTitle', { name: source.name })}
          value={token.token}
          onDone={() => {
            freshToken = null;
            setToken(null);
          }}
        />
      ) : null}
      <form
        className="panel form"
        aria-labelledby="form-settings"
        onSubmit={(event) => {
          event.preventDefault();
          save.mutate();
        }}
      >
        <h2 id="form-settings">{t('formSettings')}</h2>
        <p className="muted">{t('formSettingsIntro')}</p>
        <TextField
          label={t('sourceName')}
          value={form.name}
          onChange={set('name')}
          isRequired
          error={errors.name}
        />
        <div className="grid-2">
          <TextField
            label={t('successUrl')}
            type="url"
            value={form.success_url}
            onChange={set('success_url')}
            description={t('successUrlHelp')}
            error={errors.success_url}
          />
          <TextField
            label={t('errorUrl')}
            type="url"
            value={form.error_url}
            onChange={set('error_url')}
            description={t('errorUrlHelp')}
            error={errors.error_url}
          />
        </div>
        <TextField
          label={t('allowedOrigins')}
          multiline
          value={form.allowed_origins}
          onChange={set('allowed_origins')}
          description={t('allowedOriginsHelp')}
          error={originError}
        />
        <div className="grid-2">
          <TextField
            label={t('honeypotField')}
            value={form.honeypot_field}
            onChange={set('honeypot_field')}
            description={t('honeypotHelp')}
            error={errors.honeypot_field}
          />
          <TextField
            label={t('rateLimit')}
            type="number"
            inputMode="numeric"
            value={form.rate_limit_per_minute}
            onChange={set('rate_limit_per_minute')}
            description={t('rateLimitHelp')}
            error={errors.rate_limit_per_minute}
          />
        </div>
        <ErrorText error={save.error && Object.keys(errors).length === 0 ? save.error : null} />
        <div>
          <Button type="submit" className="button primary" isDisabled={save.isPending}>
            {t('save')}
          </Button>
        </div>
      </form>
      <section className="panel" aria-labelledby="snippet-title">
        <h2 id="snippet-title">{t('formSnippet')}</h2>
        <p className="muted">{token ? t('snippetWithToken') : t('snippetPlaceholder')}</p>
        <FormSnippet
          action={token?.intake_url ?? `${window.location.origin}/api/v1/in/YOUR_SOURCE_TOKEN`}
          honeypot={shownHoneypot}
        />
      </section>
    </>
  );
}

/** The HTML form for one of the account's entities, with a copy button. */
function FormSnippet({ action, honeypot }: { action: string; honeypot: string | null }) {
  const t = useT(messages);
  const entities = useQuery({
    queryKey: ['entities'],
    queryFn: ({ signal }) =>
      api<{ entities: { key: string; name: string; archived: boolean; fields: FieldDef[] }[] }>(
        '/api/v1/entities',
        { signal },
      ),
  });
  const active = (entities.data?.entities ?? []).filter((e) => !e.archived);
  const [entityKey, setEntityKey] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  const entity = active.find((e) => e.key === entityKey) ?? active[0];
  if (entities.isPending) return <Loading />;
  if (!entity) return <p className="muted">{t('noEntitiesForSnippet')}</p>;
  const html = formSnippet({
    action,
    entity: entity.key,
    fields: entity.fields,
    honeypot,
    submitLabel: t('snippetSubmit'),
  });
  return (
    <div className="snippet">
      {active.length > 1 ? (
        <SelectField
          label={t('snippetEntity')}
          value={entity.key}
          onChange={setEntityKey}
          options={active.map((e) => ({ id: e.key, label: e.name }))}
        />
      ) : null}
      <label className="field">
        <span className="field-label">{t('snippetCode')}</span>
        <textarea className="code" readOnly rows={12} value={html} data-testid="form-snippet" />
      </label>
      <div className="form-actions">
        <Button
          className="button secondary"
          onPress={() => {
            void navigator.clipboard
              .writeText(html)
              .then(() => setCopied(true))
              .catch(() => {});
          }}
        >
          {t('copySnippet')}
        </Button>
        <span role="status" className="notice">
          {copied ? t('copied') : ''}
        </span>
      </div>
    </div>
  );
}
