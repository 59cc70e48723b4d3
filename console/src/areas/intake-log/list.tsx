// The intake log (GET /api/v1/intake-log): what became of each intake call, with its filters.
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Button } from 'react-aria-components';
import { Link, useSearchParams } from 'react-router';
import { api } from '../../lib/api.ts';
import { useFormat, useT } from '../../lib/i18n.tsx';
import { SelectField, TextField } from '../../ui/fields.tsx';
import { PageTitle } from '../../ui/pages.tsx';
import {
  type ColumnDef,
  ColumnPicker,
  PagedTable,
  useColumnChoice,
  useCursorPages,
} from '../../ui/table.tsx';
import { messages } from './messages.ts';

interface Problem {
  key: string;
  reason: string;
  message?: string;
}
interface LogItem {
  index: number;
  status: 'created' | 'updated' | 'unchanged' | 'refused';
  record_id?: string;
  warnings?: Problem[];
  error?: string;
  details?: Problem[];
}
export interface LogEntry {
  id: string;
  request_id: string;
  endpoint: string;
  outcome: string;
  status_code: number;
  record_id: string | null;
  entity: string | null;
  source: string | null;
  warnings: Problem[];
  error: string | null;
  items: LogItem[] | null;
  created_at: string;
}

const OUTCOMES = ['created', 'updated', 'unchanged', 'refused', 'spam', 'bulk', 'replayed'] as const;
const ENDPOINTS = ['records', 'in', 'records.bulk', 's1.intake', 's1.bulk'] as const;
const FILTERS = [
  'outcome',
  'endpoint',
  'source',
  'entity',
  'record_id',
  'created_from',
  'created_to',
] as const;
type Filter = (typeof FILTERS)[number];

function Problems({ list }: { list: Problem[] | undefined }) {
  if (!list || list.length === 0) return null;
  return (
    <ul className="problems">
      {list.map((problem, index) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: the list is read-only and keeps its order
        <li key={index}>
          <code>{problem.key}</code> {problem.reason}
          {problem.message && problem.message !== problem.reason ? `: ${problem.message}` : ''}
        </li>
      ))}
    </ul>
  );
}

export function IntakeLogScreen() {
  const t = useT(messages);
  const format = useFormat();
  const [params, setParams] = useSearchParams();
  const applied = Object.fromEntries(FILTERS.map((key) => [key, params.get(key) ?? ''])) as Record<
    Filter,
    string
  >;
  const [draft, setDraft] = useState(applied);
  const pages = useCursorPages();
  const log = useQuery({
    queryKey: ['intake-log', applied, pages.cursor],
    queryFn: ({ signal }) =>
      api<{ entries: LogEntry[]; next_cursor: string | null }>('/api/v1/intake-log', {
        query: { ...applied, limit: 50, cursor: pages.cursor },
        signal,
      }),
  });
  const apply = (next: Record<Filter, string>) => {
    pages.reset();
    const search = new URLSearchParams();
    for (const key of FILTERS) if (next[key].trim() !== '') search.set(key, next[key].trim());
    setParams(search);
  };
  const outcome = (value: string) =>
    (OUTCOMES as readonly string[]).includes(value)
      ? t(`outcome.${value as (typeof OUTCOMES)[number]}`)
      : value;
  const columns: ColumnDef<LogEntry>[] = [
    { id: 'time', label: t('time'), render: (e) => format.dateTime(e.created_at), alwaysVisible: true },
    { id: 'endpoint', label: t('endpoint'), render: (e) => <code>{e.endpoint}</code> },
    {
      id: 'outcome',
      label: t('outcome'),
      render: (e) => <span className={`outcome outcome-${e.outcome}`}>{outcome(e.outcome)}</span>,
    },
    { id: 'status', label: t('status'), render: (e) => e.status_code },
    { id: 'entity', label: t('entity'), render: (e) => e.entity ?? '' },
    { id: 'source', label: t('source'), render: (e) => e.source ?? '' },
    {
      id: 'record',
      label: t('record'),
      render: (e) => (e.record_id ? <Link to={`/records/${e.record_id}`}>{t('openRecord')}</Link> : ''),
    },
    {
      id: 'result',
      label: t('result'),
      render: (e) => (
        <div className="log-result">
          {e.error ? <strong className="error-text">{e.error}</strong> : null}
          <Problems list={e.warnings} />
          {e.items ? (
            <details>
              <summary>{t('bulkSummary', summarize(e.items))}</summary>
              <ol className="bulk-items" start={0}>
                {e.items.map((item) => (
                  <li key={item.index}>
                    {t('itemLine', { index: item.index, status: outcome(item.status) })}{' '}
                    {item.record_id ? <Link to={`/records/${item.record_id}`}>{t('openRecord')}</Link> : null}
                    {item.error ? <strong className="error-text"> {item.error}</strong> : null}
                    <Problems list={item.warnings} />
                    <Problems list={item.details} />
                  </li>
                ))}
              </ol>
            </details>
          ) : null}
        </div>
      ),
    },
    {
      id: 'request',
      label: t('requestId'),
      render: (e) => <code>{e.request_id}</code>,
      defaultVisible: false,
    },
  ];
  const choice = useColumnChoice('leadline.intake-log.columns', columns);
  const set = (key: Filter) => (value: string) => setDraft((d) => ({ ...d, [key]: value }));
  return (
    <section>
      <PageTitle actions={<ColumnPicker columns={columns} chosen={choice.chosen} onChange={choice.choose} />}>
        {t('title')}
      </PageTitle>
      <p className="muted">{t('intro')}</p>
      <form
        className="filters"
        aria-label={t('filters')}
        onSubmit={(event) => {
          event.preventDefault();
          apply(draft);
        }}
      >
        <SelectField
          label={t('outcome')}
          value={draft.outcome}
          onChange={set('outcome')}
          options={[{ id: '', label: t('any') }, ...OUTCOMES.map((o) => ({ id: o, label: outcome(o) }))]}
        />
        <SelectField
          label={t('endpoint')}
          value={draft.endpoint}
          onChange={set('endpoint')}
          options={[{ id: '', label: t('any') }, ...ENDPOINTS.map((e) => ({ id: e, label: e }))]}
        />
        <TextField label={t('source')} value={draft.source} onChange={set('source')} />
        <TextField label={t('entity')} value={draft.entity} onChange={set('entity')} />
        <TextField label={t('recordId')} value={draft.record_id} onChange={set('record_id')} />
        <TextField label={t('from')} type="date" value={draft.created_from} onChange={set('created_from')} />
        <TextField label={t('to')} type="date" value={draft.created_to} onChange={set('created_to')} />
        <div className="form-actions">
          <Button type="submit" className="button primary">
            {t('apply')}
          </Button>
          <Button
            className="button secondary"
            onPress={() => {
              const empty = Object.fromEntries(FILTERS.map((key) => [key, ''])) as Record<Filter, string>;
              setDraft(empty);
              apply(empty);
            }}
          >
            {t('clear')}
          </Button>
        </div>
      </form>
      <PagedTable
        query={log}
        rowsOf={(data) => data.entries}
        pages={pages}
        label={t('title')}
        columns={choice.visible}
        rowId={(e) => e.id}
        empty={t('empty')}
      />
    </section>
  );
}

function summarize(items: LogItem[]) {
  const count = (status: LogItem['status']) => items.filter((item) => item.status === status).length;
  return {
    total: items.length,
    created: count('created'),
    updated: count('updated') + count('unchanged'),
    refused: count('refused'),
  };
}
