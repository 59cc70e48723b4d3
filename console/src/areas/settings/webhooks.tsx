// Account webhooks (decisions §12): list, create (secret shown once), edit, rotate the secret,
// delete, send a test, resend what failed, and each subscription's recent attempts.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Button, Checkbox, CheckboxGroup, Label } from 'react-aria-components';
import { Link, useNavigate, useParams } from 'react-router';
import { api } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { MessageAttempts } from '../../ui/attempts.tsx';
import { ErrorText, useDescribeError } from '../../ui/errors.tsx';
import { TextField } from '../../ui/fields.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { type ColumnDef, DataTable } from '../../ui/table.tsx';
import { useToast } from '../../ui/toast.tsx';
import { WEBHOOK_EVENTS, type Webhook, type WebhookRecovery, type WebhookTestResult } from './api.ts';
import { messages } from './messages.ts';
import { CheckboxField, ConfirmButton, errorsOf, SecretOnce, SettingsNav } from './parts.tsx';

const WEBHOOKS = ['settings', 'webhooks'] as const;
const BASE = '/api/v1/settings/webhooks';

/** A secret just issued, kept only in memory for the page that shows it. */
let freshSecret: { id: string; secret: string } | null = null;

function EventsPicker({
  value,
  onChange,
  error,
}: {
  value: string[];
  onChange(value: string[]): void;
  error?: string | null;
}) {
  const t = useT(messages);
  const all = value.includes('*');
  return (
    <div className="form">
      <CheckboxField label={t('allEvents')} isSelected={all} onChange={(on) => onChange(on ? ['*'] : [])} />
      <CheckboxGroup value={all ? [] : value} onChange={onChange} isDisabled={all} className="checkbox-group">
        <Label>{t('events')}</Label>
        <div className="checkbox-grid">
          {WEBHOOK_EVENTS.map((event) => (
            <Checkbox key={event} value={event} className="checkbox">
              <span className="checkbox-box" aria-hidden="true" />
              <code>{event}</code>
            </Checkbox>
          ))}
        </div>
      </CheckboxGroup>
      {error ? <p className="error-text">{error}</p> : null}
    </div>
  );
}

export function WebhooksScreen() {
  const t = useT(messages);
  const navigate = useNavigate();
  const client = useQueryClient();
  const list = useQuery({
    queryKey: WEBHOOKS,
    queryFn: ({ signal }) => api<{ webhooks: Webhook[] }>(BASE, { query: { limit: 100 }, signal }),
  });
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<string[]>(['*']);
  const create = useMutation({
    mutationFn: () =>
      api<Webhook & { secret: string }>(BASE, {
        method: 'POST',
        body: { url: url.trim(), events, ...(description.trim() ? { description: description.trim() } : {}) },
      }),
    onSuccess: (hook) => {
      freshSecret = { id: hook.id, secret: hook.secret };
      void client.invalidateQueries({ queryKey: WEBHOOKS });
      void navigate(`/settings/webhooks/${hook.id}`);
    },
  });
  const errors = errorsOf(create.error);
  const columns: ColumnDef<Webhook>[] = [
    {
      id: 'url',
      label: t('url'),
      render: (w) => <Link to={`/settings/webhooks/${w.id}`}>{w.url}</Link>,
      alwaysVisible: true,
    },
    {
      id: 'events',
      label: t('events'),
      render: (w) => (w.events.includes('*') ? t('allEvents') : w.events.join(', ')),
    },
    { id: 'state', label: t('status'), render: (w) => <WebhookState hook={w} /> },
    { id: 'description', label: t('description'), render: (w) => w.description ?? '' },
  ];
  return (
    <section>
      <SettingsNav />
      <PageTitle>{t('webhooks')}</PageTitle>
      <p className="muted">{t('webhooksIntro')}</p>
      {list.isPending ? <Loading /> : null}
      <ErrorText error={list.error} />
      {list.data ? (
        <DataTable
          label={t('webhooks')}
          columns={columns}
          rows={list.data.webhooks}
          rowId={(w) => w.id}
          empty={t('noWebhooks')}
        />
      ) : null}
      <form
        className="panel form"
        aria-labelledby="create-webhook"
        onSubmit={(event) => {
          event.preventDefault();
          create.mutate();
        }}
      >
        <h2 id="create-webhook">{t('createWebhook')}</h2>
        <TextField label={t('url')} type="url" value={url} onChange={setUrl} isRequired error={errors.url} />
        <TextField
          label={t('description')}
          value={description}
          onChange={setDescription}
          error={errors.description}
        />
        <EventsPicker value={events} onChange={setEvents} error={errors.events} />
        <ErrorText error={create.error && Object.keys(errors).length === 0 ? create.error : null} />
        <div>
          <Button
            type="submit"
            className="button primary"
            isDisabled={create.isPending || url.trim() === '' || events.length === 0}
          >
            {t('createWebhook')}
          </Button>
        </div>
      </form>
    </section>
  );
}

function WebhookState({ hook }: { hook: Webhook }) {
  const t = useT(messages);
  if (hook.enabled) return <>{hook.failing_since ? t('enabledFailing') : t('enabled')}</>;
  const reason = hook.disabled_reason;
  return (
    <>
      {t('disabled')}
      {reason === 'gone' || reason === 'failing' || reason === 'by_user'
        ? ` (${t(`disabled.${reason}`)})`
        : ''}
    </>
  );
}

export function WebhookScreen() {
  const t = useT(messages);
  const { id = '' } = useParams();
  const hook = useQuery({
    queryKey: [...WEBHOOKS, id],
    queryFn: ({ signal }) => api<Webhook>(`${BASE}/${id}`, { signal }),
  });
  if (hook.isError) throw hook.error;
  return (
    <section>
      <SettingsNav />
      <PageTitle>{t('webhookTitle')}</PageTitle>
      <p>
        <Link to="/settings/webhooks">{t('backToWebhooks')}</Link>
      </p>
      {hook.data ? <WebhookDetail key={hook.data.updated_at} hook={hook.data} /> : <Loading />}
      {hook.data ? (
        <MessageAttempts
          url={`${BASE}/${hook.data.id}/attempts`}
          queryKey={[...WEBHOOKS, hook.data.id, 'attempts']}
          headingId="attempts-title"
        />
      ) : null}
    </section>
  );
}

function WebhookDetail({ hook }: { hook: Webhook }) {
  const t = useT(messages);
  const toast = useToast();
  const describe = useDescribeError();
  const navigate = useNavigate();
  const client = useQueryClient();
  const [secret, setSecret] = useState<string | null>(() =>
    freshSecret?.id === hook.id ? freshSecret.secret : null,
  );
  const [url, setUrl] = useState(hook.url);
  const [description, setDescription] = useState(hook.description ?? '');
  const [events, setEvents] = useState<string[]>(hook.events);
  const [enabled, setEnabled] = useState(hook.enabled);
  const [result, setResult] = useState<WebhookTestResult | null>(null);
  const refresh = () => {
    void client.invalidateQueries({ queryKey: WEBHOOKS });
  };
  const save = useMutation({
    mutationFn: (body: Record<string, unknown>) =>
      api<Webhook>(`${BASE}/${hook.id}`, { method: 'PATCH', body }),
    onSuccess: (saved) => {
      if (saved.secret) {
        freshSecret = { id: hook.id, secret: saved.secret };
        setSecret(saved.secret);
      } else toast.show(t('saved'));
      refresh();
    },
  });
  const test = useMutation({
    mutationFn: () => api<WebhookTestResult>(`${BASE}/${hook.id}/test`, { method: 'POST' }),
    onSuccess: (answer) => {
      setResult(answer);
      void client.invalidateQueries({ queryKey: [...WEBHOOKS, hook.id, 'attempts'] });
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });
  const remove = useMutation({
    mutationFn: () => api(`${BASE}/${hook.id}`, { method: 'DELETE' }),
    onSuccess: () => {
      toast.show(t('webhookDeleted'));
      refresh();
      void navigate('/settings/webhooks');
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });
  const errors = errorsOf(save.error);
  return (
    <>
      {secret ? (
        <SecretOnce
          title={t('webhookSecret')}
          value={secret}
          onDone={() => {
            freshSecret = null;
            setSecret(null);
          }}
        >
          <p className="muted small">{t('webhookSecretHelp')}</p>
        </SecretOnce>
      ) : null}
      <p>
        <strong>{t('status')}:</strong> <WebhookState hook={hook} />
      </p>
      <form
        className="panel form"
        aria-labelledby="edit-webhook"
        onSubmit={(event) => {
          event.preventDefault();
          save.mutate({ url: url.trim(), description: description.trim() || null, events, enabled });
        }}
      >
        <h2 id="edit-webhook">{t('editWebhook')}</h2>
        <TextField label={t('url')} type="url" value={url} onChange={setUrl} isRequired error={errors.url} />
        <TextField
          label={t('description')}
          value={description}
          onChange={setDescription}
          error={errors.description}
        />
        <EventsPicker value={events} onChange={setEvents} error={errors.events} />
        <CheckboxField label={t('enabled')} isSelected={enabled} onChange={setEnabled} />
        <ErrorText error={save.error && Object.keys(errors).length === 0 ? save.error : null} />
        <div className="form-actions">
          <Button type="submit" className="button primary" isDisabled={save.isPending || events.length === 0}>
            {t('save')}
          </Button>
          <ConfirmButton
            label={t('rotateSecret')}
            title={t('rotateSecretTitle')}
            text={t('rotateSecretText')}
            confirmLabel={t('rotateSecret')}
            danger={false}
            onConfirm={() => save.mutate({ rotate_secret: true })}
          />
          <ConfirmButton
            label={t('deleteWebhook')}
            title={t('deleteWebhookTitle')}
            text={t('deleteWebhookText')}
            confirmLabel={t('deleteWebhook')}
            onConfirm={() => remove.mutate()}
          />
        </div>
      </form>
      <section className="panel" aria-labelledby="test-webhook">
        <h2 id="test-webhook">{t('testWebhook')}</h2>
        <p className="muted">{t('testWebhookHelp')}</p>
        <Button className="button secondary" isDisabled={test.isPending} onPress={() => test.mutate()}>
          {test.isPending ? t('sending') : t('sendTest')}
        </Button>
        <div role="status">
          {result ? (
            <p className={result.delivered ? 'notice' : 'error-text'}>
              {result.delivered
                ? t('testDelivered', { code: result.status_code ?? '', ms: result.duration_ms })
                : t('testFailed', { code: result.status_code ?? '—', error: result.error ?? '' })}
            </p>
          ) : null}
        </div>
      </section>
      <RecoverPanel hook={hook} />
    </>
  );
}

/** A `datetime-local` control's value (the browser's wall clock, to the minute) for a time. */
function localMinute(time: Date): string {
  const local = new Date(time.getTime() - time.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 16);
}

/**
 * Resending the messages that failed since a time (after the receiver's outage), one more
 * attempt each. Preset to an hour before the endpoint started failing (a message written just
 * before its first failure counts), else to the last 24 hours; a wider window costs nothing, as
 * only failed messages are sent.
 */
function RecoverPanel({ hook }: { hook: Webhook }) {
  const t = useT(messages);
  const client = useQueryClient();
  const [since, setSince] = useState(() =>
    localMinute(
      new Date(hook.failing_since ? Date.parse(hook.failing_since) - 3_600_000 : Date.now() - 86_400_000),
    ),
  );
  const recover = useMutation({
    // The control holds the browser's wall-clock time; the service takes it with its offset.
    mutationFn: () =>
      api<WebhookRecovery>(`${BASE}/${hook.id}/recover`, {
        method: 'POST',
        body: { since: new Date(since).toISOString() },
      }),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: [...WEBHOOKS, hook.id, 'attempts'] });
    },
  });
  const sinceTime = new Date(since);
  const valid = since !== '' && !Number.isNaN(sinceTime.getTime()) && sinceTime.getTime() < Date.now();
  return (
    <section className="panel form" aria-labelledby="recover-webhook">
      <h2 id="recover-webhook">{t('recoverWebhook')}</h2>
      <p className="muted">{t('recoverWebhookHelp')}</p>
      <TextField
        label={t('failedSince')}
        type="datetime-local"
        value={since}
        onChange={setSince}
        isRequired
        error={since !== '' && !valid ? t('failedSinceInvalid') : null}
      />
      <div>
        <Button
          className="button secondary"
          isDisabled={recover.isPending || !valid || !hook.enabled}
          onPress={() => recover.mutate()}
        >
          {recover.isPending ? t('sending') : t('resendFailed')}
        </Button>
      </div>
      {hook.enabled ? null : <p className="muted">{t('recoverNeedsEnabled')}</p>}
      <div role="status">
        {recover.data ? (
          <p className="notice">
            {t('recovered', { count: recover.data.requeued })}
            {recover.data.more ? ` ${t('recoveredMore')}` : ''}
          </p>
        ) : null}
      </div>
      <ErrorText error={recover.error} />
    </section>
  );
}
