import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useMemo, useState } from 'react';
import { Button, Form } from 'react-aria-components';
import { Link, useParams } from 'react-router';
import { ApiError, api, fieldErrors } from '../../lib/api.ts';
import { useFormat, useT } from '../../lib/i18n.tsx';
import { useSession } from '../../lib/session.tsx';
import { ErrorText, useDescribeError } from '../../ui/errors.tsx';
import { SelectField, TextField } from '../../ui/fields.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { useToast } from '../../ui/toast.tsx';
import {
  type Entity,
  type History,
  type LeadRecord,
  type RecordDocument,
  useEntities,
  usePipelines,
} from './api.ts';
import { type Draft, displayValue, FieldInput, fromDraft, sameDraft, toDraft } from './field-input.tsx';
import { messages } from './messages.ts';

/** A 404 shows the not-found page (RouteError); other errors stay in their section. */
const throwNotFound = (error: Error) => error instanceof ApiError && error.status === 404;

export function RecordPage() {
  const { id = '' } = useParams();
  const t = useT(messages);
  const format = useFormat();
  const record = useQuery({
    queryKey: ['records', 'one', id],
    queryFn: ({ signal }) => api<LeadRecord>(`/api/v1/records/${encodeURIComponent(id)}`, { signal }),
    throwOnError: throwNotFound,
  });
  const entities = useEntities();
  const session = useSession();

  if (record.isPending || entities.isPending) return <Loading />;
  if (record.isError) return <ErrorText error={record.error} />;
  const data = record.data;
  const entity = entities.data?.entities.find((e) => e.key === data.entity);

  return (
    <article className="record">
      <p>
        <Link to="/records">{t('back')}</Link>
      </p>
      <PageTitle>{data.name || t('unnamed')}</PageTitle>
      <dl className="facts panel" aria-label={t('details')}>
        <dt>{t('entity')}</dt>
        <dd>{entity?.name ?? data.entity}</dd>
        <dt>{t('source')}</dt>
        <dd>{data.source}</dd>
        <dt>{t('created')}</dt>
        <dd>{format.dateTime(data.created_at)}</dd>
        <dt>{t('updated')}</dt>
        <dd>{format.dateTime(data.updated_at)}</dd>
        {data.crm ? (
          <>
            <dt>{t('stage')}</dt>
            <dd>
              {data.crm.pipeline} · {data.crm.stage}
            </dd>
          </>
        ) : null}
        {data.external_id ? (
          <>
            <dt>{t('externalId')}</dt>
            <dd>{data.external_id}</dd>
          </>
        ) : null}
        <dt>{t('recordId')}</dt>
        <dd>
          <code>{data.id}</code>
        </dd>
      </dl>
      {data.crm && session.hasModule('crm') && session.can('stages:write') ? (
        <StageMove record={data} />
      ) : null}
      <div className="grid-2">
        <div>
          {entity ? <FieldsSection record={data} entity={entity} /> : null}
          <DocumentsSection record={data} />
        </div>
        <div>
          <NotesAndHistory record={data} />
          {session.hasModule('distribution') ? <DeliveriesSection recordId={data.id} /> : null}
          {session.hasModule('booking') ? <AppointmentsSection recordId={data.id} /> : null}
        </div>
      </div>
    </article>
  );
}

function FieldsSection({ record, entity }: { record: LeadRecord; entity: Entity }) {
  const t = useT(messages);
  const session = useSession();
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const editable = session.can('records:write');
  const fields = entity.fields.filter((f) => f.type !== 'file' && f.type !== 'files');
  const initial = useMemo(
    () =>
      Object.fromEntries(fields.map((f) => [f.key, toDraft(f, record.fields[f.key])])) as Record<
        string,
        Draft
      >,
    [fields, record.fields],
  );
  const [drafts, setDrafts] = useState(initial);
  const [errors, setErrors] = useState<Record<string, string>>({});
  // A change saved here or arriving from elsewhere resets the form to the stored values.
  // biome-ignore lint/correctness/useExhaustiveDependencies: reset only when the record changed
  useEffect(() => setDrafts(initial), [record.updated_at]);
  const labels = { yes: t('yes'), no: t('no'), notSet: t('notSet') };

  const save = useMutation({
    mutationFn: (changed: Record<string, unknown>) =>
      api<{ updated: boolean }>(`/api/v1/records/${record.id}`, {
        method: 'PATCH',
        body: { fields: changed },
      }),
    onSuccess: async () => {
      setErrors({});
      toast.show(t('saved'));
      await client.invalidateQueries({ queryKey: ['records'] });
    },
    onError: (error) => {
      setErrors(fieldErrors(error));
      toast.show(describe(error), 'error');
    },
  });

  if (!editable) {
    return (
      <section className="panel" aria-labelledby="fields-title">
        <h2 id="fields-title">{t('fieldsTitle')}</h2>
        <p className="muted">{t('readOnly')}</p>
        <dl className="facts">
          {fields.map((field) => (
            <div key={field.key}>
              <dt>{field.label}</dt>
              <dd>{displayValue(field, record.fields[field.key], labels)}</dd>
            </div>
          ))}
        </dl>
      </section>
    );
  }

  function submit(event: FormEvent) {
    event.preventDefault();
    const changed: Record<string, unknown> = {};
    for (const field of fields) {
      const draft = drafts[field.key] ?? '';
      if (!sameDraft(draft, initial[field.key] ?? '')) changed[field.key] = fromDraft(field, draft);
    }
    if (Object.keys(changed).length === 0) {
      toast.show(t('nothingChanged'), 'info');
      return;
    }
    save.mutate(changed);
  }

  return (
    <section className="panel" aria-labelledby="fields-title">
      <h2 id="fields-title">{t('fieldsTitle')}</h2>
      <Form className="form" onSubmit={submit}>
        {fields.map((field) => (
          <FieldInput
            key={field.key}
            field={field}
            value={drafts[field.key] ?? ''}
            onChange={(value) => setDrafts((current) => ({ ...current, [field.key]: value }))}
            error={errors[field.key]}
            labels={labels}
          />
        ))}
        <Button type="submit" className="button primary" isDisabled={save.isPending}>
          {save.isPending ? t('saving') : t('save')}
        </Button>
      </Form>
    </section>
  );
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function DocumentsSection({ record }: { record: LeadRecord }) {
  const t = useT(messages);
  const toast = useToast();
  const describe = useDescribeError();
  // A signed address (30 minutes, this document only) in place of the session: the download
  // is a plain navigation that needs no header (decisions §6).
  async function open(doc: RecordDocument) {
    try {
      const signed = await api<{ url: string }>(`/api/v1/documents/${doc.id}/signed-url`, { method: 'POST' });
      window.location.assign(signed.url);
    } catch (error) {
      toast.show(describe(error), 'error');
    }
  }
  return (
    <section className="panel" aria-labelledby="documents-title">
      <h2 id="documents-title">{t('documentsTitle')}</h2>
      {record.documents.length === 0 ? (
        <p className="muted">{t('noDocuments')}</p>
      ) : (
        <ul className="plain-list">
          {record.documents.map((doc) => (
            <li key={doc.id}>
              <Button className="button secondary" onPress={() => void open(doc)}>
                {t('openDocument', { name: doc.name })}
              </Button>{' '}
              <span className="muted">
                {doc.mime}, {formatSize(doc.size)}, {doc.field ?? t('documentPool')}
              </span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function formatDuration(seconds: number, locale: string): string {
  const units: [Intl.RelativeTimeFormatUnit, number][] = [
    ['day', 86_400],
    ['hour', 3_600],
    ['minute', 60],
  ];
  const parts: string[] = [];
  let rest = seconds;
  for (const [unit, size] of units) {
    const count = Math.floor(rest / size);
    if (count > 0 || (unit === 'minute' && parts.length === 0)) {
      parts.push(new Intl.NumberFormat(locale, { style: 'unit', unit, unitDisplay: 'short' }).format(count));
      rest -= count * size;
    }
    if (parts.length === 2) break;
  }
  return parts.join(' ');
}

function NotesAndHistory({ record }: { record: LeadRecord }) {
  const t = useT(messages);
  const format = useFormat();
  const session = useSession();
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const history = useQuery({
    queryKey: ['records', 'history', record.id, record.updated_at],
    queryFn: ({ signal }) =>
      api<History>(`/api/v1/records/${record.id}/history`, { query: { limit: 100 }, signal }),
  });
  const [body, setBody] = useState('');
  const [kind, setKind] = useState('general');
  const [error, setError] = useState<string | null>(null);
  const add = useMutation({
    mutationFn: () => api('/api/v1/notes', { method: 'POST', body: { record: record.id, body, kind } }),
    onSuccess: async () => {
      setBody('');
      toast.show(t('noteAdded'));
      await client.invalidateQueries({ queryKey: ['records'] });
    },
    onError: (failure) => setError(describe(failure)),
  });
  const locale = document.documentElement.lang === 'de' ? 'de-DE' : 'en-GB';
  const events = history.data?.events ?? [];
  const notes = events.filter((event) => event.type === 'note_added');
  const kindLabel = (value: unknown) =>
    value === 'call' || value === 'email' || value === 'general' ? t(`kind.${value}`) : '';

  function submit(event: FormEvent) {
    event.preventDefault();
    setError(null);
    if (body.trim() === '') {
      setError(t('noteEmpty'));
      return;
    }
    add.mutate();
  }

  return (
    <>
      <section className="panel" aria-labelledby="notes-title">
        <h2 id="notes-title">{t('notesTitle')}</h2>
        {history.isPending ? <Loading /> : null}
        <ErrorText error={history.error} />
        {history.data && notes.length === 0 ? <p className="muted">{t('noNotes')}</p> : null}
        <ul className="plain-list notes">
          {notes.map((note) => (
            <li key={note.id}>
              <p className="note-text">{note.message}</p>
              <p className="muted">
                {kindLabel(note.data.kind)} · {format.dateTime(note.created_at)} ·{' '}
                {t('by', { name: note.actor.name })}
              </p>
            </li>
          ))}
        </ul>
        {session.can('notes:write') ? (
          <Form className="form" onSubmit={submit}>
            <TextField
              label={t('noteText')}
              multiline
              value={body}
              onChange={setBody}
              error={error}
              isRequired
            />
            <SelectField
              label={t('noteKind')}
              value={kind}
              onChange={setKind}
              options={['general', 'call', 'email'].map((id) => ({ id, label: kindLabel(id) }))}
            />
            <Button type="submit" className="button primary" isDisabled={add.isPending}>
              {t('addNote')}
            </Button>
          </Form>
        ) : null}
      </section>
      <section className="panel" aria-labelledby="history-title">
        <h2 id="history-title">{t('historyTitle')}</h2>
        {history.data && history.data.stages.length > 0 ? (
          <>
            <h3>{t('stagesTitle')}</h3>
            <div className="table-scroll">
              <table className="table">
                <thead>
                  <tr>
                    <th scope="col">{t('stage')}</th>
                    <th scope="col">{t('entered')}</th>
                    <th scope="col">{t('duration')}</th>
                  </tr>
                </thead>
                <tbody>
                  {history.data.stages.map((stay) => (
                    <tr key={`${stay.pipeline}-${stay.stage}-${stay.entered_at}`}>
                      <td>
                        {stay.pipeline} · {stay.stage}
                      </td>
                      <td>{format.dateTime(stay.entered_at)}</td>
                      <td>
                        {formatDuration(stay.seconds, locale)}
                        {stay.left_at ? '' : ` (${t('current')})`}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </>
        ) : null}
        {history.data && events.length === 0 ? <p className="muted">{t('noHistory')}</p> : null}
        <ol className="plain-list history">
          {events.map((event) => (
            <li key={event.id}>
              <strong>{event.type}</strong> <span>{event.message}</span>
              <p className="muted">
                {format.dateTime(event.created_at)} · {t('by', { name: event.actor.name })}
              </p>
            </li>
          ))}
        </ol>
      </section>
    </>
  );
}

interface Delivery {
  id: string;
  status: string;
  partner: string;
  price_cents: number;
  currency: string;
  created_at: string;
}

function DeliveriesSection({ recordId }: { recordId: string }) {
  const t = useT(messages);
  const format = useFormat();
  const deliveries = useQuery({
    queryKey: ['records', 'deliveries', recordId],
    queryFn: ({ signal }) =>
      api<{ deliveries: Delivery[] }>('/api/v1/distribution/deliveries', {
        query: { record_id: recordId, limit: 100 },
        signal,
      }),
  });
  const rows = deliveries.data?.deliveries ?? [];
  return (
    <section className="panel" aria-labelledby="deliveries-title">
      <h2 id="deliveries-title">{t('deliveriesTitle')}</h2>
      {deliveries.isPending ? <Loading /> : null}
      <ErrorText error={deliveries.error} />
      {deliveries.data && rows.length === 0 ? <p className="muted">{t('noDeliveries')}</p> : null}
      {rows.length > 0 ? (
        <div className="table-scroll">
          <table className="table">
            <thead>
              <tr>
                <th scope="col">{t('partner')}</th>
                <th scope="col">{t('status')}</th>
                <th scope="col">{t('price')}</th>
                <th scope="col">{t('created')}</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((delivery) => (
                <tr key={delivery.id}>
                  <td>{delivery.partner}</td>
                  <td>{delivery.status}</td>
                  <td>{format.money(delivery.price_cents, delivery.currency)}</td>
                  <td>{format.dateTime(delivery.created_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}

interface Appointment {
  id: string;
  title: string;
  starts_at: string;
  status: string;
}

function AppointmentsSection({ recordId }: { recordId: string }) {
  const t = useT(messages);
  const format = useFormat();
  const appointments = useQuery({
    queryKey: ['records', 'appointments', recordId],
    queryFn: ({ signal }) =>
      api<{ appointments: Appointment[] }>('/api/v1/booking/appointments', {
        query: { record_id: recordId, limit: 100 },
        signal,
      }),
  });
  const rows = appointments.data?.appointments ?? [];
  return (
    <section className="panel" aria-labelledby="appointments-title">
      <h2 id="appointments-title">{t('appointmentsTitle')}</h2>
      {appointments.isPending ? <Loading /> : null}
      <ErrorText error={appointments.error} />
      {appointments.data && rows.length === 0 ? <p className="muted">{t('noAppointments')}</p> : null}
      <ul className="plain-list">
        {rows.map((appointment) => (
          <li key={appointment.id}>
            <strong>{appointment.title}</strong> · {format.dateTime(appointment.starts_at)} ·{' '}
            {appointment.status}
          </li>
        ))}
      </ul>
    </section>
  );
}

function StageMove({ record }: { record: LeadRecord }) {
  const t = useT(messages);
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const pipelines = usePipelines(true);
  const [stage, setStage] = useState(record.crm?.stage ?? '');
  const stages =
    pipelines.data?.entities
      .find((e) => e.key === record.entity)
      ?.pipelines.find((p) => p.name === record.crm?.pipeline)?.stages ?? [];
  const move = useMutation({
    mutationFn: () =>
      api(`/api/v1/crm/records/${record.id}/stage`, {
        method: 'POST',
        body: { stage, pipeline: record.crm?.pipeline },
      }),
    onSuccess: async () => {
      toast.show(t('moved', { stage }));
      await client.invalidateQueries({ queryKey: ['records'] });
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });
  if (stages.length === 0) return null;
  return (
    <Form
      className="panel stage-move"
      onSubmit={(event) => {
        event.preventDefault();
        move.mutate();
      }}
    >
      <SelectField
        label={t('moveStage')}
        value={stage}
        onChange={setStage}
        options={stages.map((name) => ({ id: name, label: name }))}
      />
      <Button
        type="submit"
        className="button secondary"
        isDisabled={move.isPending || stage === record.crm?.stage}
      >
        {t('move')}
      </Button>
    </Form>
  );
}
