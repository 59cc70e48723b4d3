import { keepPreviousData, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useMemo, useRef, useState } from 'react';
import { Button } from 'react-aria-components';
import { useSearchParams } from 'react-router';
import { api } from '../../lib/api.ts';
import { useFormat, useT } from '../../lib/i18n.tsx';
import { useSession } from '../../lib/session.tsx';
import { SelectField, type SelectOption, TextField } from '../../ui/fields.tsx';
import { PageTitle } from '../../ui/pages.tsx';
import {
  type ColumnDef,
  ColumnPicker,
  PagedTable,
  useColumnChoice,
  useCursorPages,
} from '../../ui/table.tsx';
import { emailOf, type LeadRecord, type RecordPage, useEntities, usePipelines } from './api.ts';
import { messages } from './messages.ts';

const PAGE_SIZE = 50;
/** How often the list asks for records changed since it last looked. */
export const POLL_MS = 3000;
const FILTERS = ['entity', 'stage', 'source', 'created_from', 'created_to', 'q'] as const;
type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** The filters live in the address: shareable, and the back button restores them. */
function useFilters(): [Filters, (change: Filters) => void] {
  const [params, setParams] = useSearchParams();
  const filters = useMemo(() => {
    const out: Filters = {};
    for (const key of FILTERS) {
      const value = params.get(key);
      if (value) out[key] = value;
    }
    return out;
  }, [params]);
  const update = (change: Filters) =>
    setParams(
      (current) => {
        const next = new URLSearchParams(current);
        for (const [key, value] of Object.entries(change)) {
          if (value) next.set(key, value);
          else next.delete(key);
        }
        return next;
      },
      { replace: true },
    );
  return [filters, update];
}

export function RecordsList() {
  const t = useT(messages);
  const format = useFormat();
  const session = useSession();
  const client = useQueryClient();
  const [filters, setFilters] = useFilters();
  const pages = useCursorPages();
  const entities = useEntities();
  const hasCrm = session.hasModule('crm');
  const pipelines = usePipelines(hasCrm);
  const [search, setSearch] = useState(filters.q ?? '');

  // The search box waits for a pause in typing before it asks the service.
  useEffect(() => {
    const timer = setTimeout(() => {
      if ((filters.q ?? '') !== search.trim()) setFilters({ q: search.trim() });
    }, 350);
    return () => clearTimeout(timer);
  }, [search, filters.q, setFilters]);

  // biome-ignore lint/correctness/useExhaustiveDependencies: a new filter starts at the first page
  useEffect(() => pages.reset(), [JSON.stringify(filters)]);

  const query = { ...filters, order: 'newest', limit: PAGE_SIZE };
  const list = useQuery({
    queryKey: ['records', 'list', query, pages.cursor],
    queryFn: ({ signal }) =>
      api<RecordPage>('/api/v1/records', { query: { ...query, cursor: pages.cursor }, signal }),
    placeholderData: keepPreviousData,
  });

  // Live updates: ask for what changed since the newest change known (updated_since, the same
  // filters); anything unseen refreshes the list and is announced.
  const known = useRef(new Map<string, string>());
  const [since, setSince] = useState<string | null>(null);
  const [announcement, setAnnouncement] = useState('');
  useEffect(() => {
    if (!list.data) return;
    let newest = since;
    for (const record of list.data.records) {
      known.current.set(record.id, record.updated_at);
      if (!newest || record.updated_at > newest) newest = record.updated_at;
    }
    if (!newest) newest = new Date(Date.now() - 60_000).toISOString();
    if (newest !== since) setSince(newest);
  }, [list.data, since]);
  const changes = useQuery({
    queryKey: ['records', 'changes', filters, since],
    queryFn: ({ signal }) =>
      api<RecordPage>('/api/v1/records', {
        query: { ...filters, updated_since: since, order: 'updated', limit: 100 },
        signal,
      }),
    enabled: since !== null,
    refetchInterval: POLL_MS,
    refetchIntervalInBackground: false,
  });
  useEffect(() => {
    const fresh = (changes.data?.records ?? []).filter((r) => known.current.get(r.id) !== r.updated_at);
    if (fresh.length === 0) return;
    for (const record of fresh) known.current.set(record.id, record.updated_at);
    const newest = fresh.reduce((max, r) => (r.updated_at > max ? r.updated_at : max), since ?? '');
    setAnnouncement(
      `${t('liveNew', { count: fresh.length })} ${t('liveUpdated', { time: format.dateTime(new Date().toISOString()) })}`,
    );
    void client.invalidateQueries({ queryKey: ['records', 'list'] });
    setSince(newest);
  }, [changes.data, client, since, t, format]);

  const entityOptions: SelectOption[] = [
    { id: '', label: t('allEntities') },
    ...(entities.data?.entities ?? []).filter((e) => !e.archived).map((e) => ({ id: e.key, label: e.name })),
  ];
  const stageNames = new Set<string>();
  for (const entity of pipelines.data?.entities ?? []) {
    if (filters.entity && entity.key !== filters.entity) continue;
    for (const pipeline of entity.pipelines) for (const stage of pipeline.stages) stageNames.add(stage);
  }
  const stageOptions: SelectOption[] = [
    { id: '', label: t('allStages') },
    ...[...stageNames].map((name) => ({ id: name, label: name })),
  ];

  const columns: ColumnDef<LeadRecord>[] = [
    { id: 'name', label: t('name'), render: (r) => r.name || t('unnamed'), alwaysVisible: true },
    { id: 'email', label: t('email'), render: (r) => emailOf(r, entities.data?.entities) },
    { id: 'entity', label: t('entity'), render: (r) => r.entity },
    { id: 'source', label: t('source'), render: (r) => r.source },
    ...(hasCrm ? [{ id: 'stage', label: t('stage'), render: (r: LeadRecord) => r.crm?.stage ?? '' }] : []),
    { id: 'created_at', label: t('created'), render: (r) => format.dateTime(r.created_at) },
    {
      id: 'updated_at',
      label: t('updated'),
      render: (r) => format.dateTime(r.updated_at),
      defaultVisible: false,
    },
  ];
  const choice = useColumnChoice('leadline.records.columns', columns);
  const filtered = FILTERS.some((key) => filters[key]);

  return (
    <section>
      <PageTitle actions={<ColumnPicker columns={columns} chosen={choice.chosen} onChange={choice.choose} />}>
        {t('title')}
      </PageTitle>
      <search className="filters" aria-label={t('filters')}>
        <TextField label={t('search')} type="search" value={search} onChange={setSearch} />
        <SelectField
          label={t('entity')}
          value={filters.entity ?? ''}
          options={entityOptions}
          onChange={(value) => setFilters({ entity: value, stage: '' })}
        />
        {hasCrm ? (
          <SelectField
            label={t('stage')}
            value={filters.stage ?? ''}
            options={stageOptions}
            onChange={(value) => setFilters({ stage: value })}
          />
        ) : null}
        <TextField
          label={t('source')}
          value={filters.source ?? ''}
          onChange={(value) => setFilters({ source: value })}
        />
        <TextField
          label={t('createdFrom')}
          type="date"
          value={filters.created_from ?? ''}
          onChange={(value) => setFilters({ created_from: value })}
        />
        <TextField
          label={t('createdTo')}
          type="date"
          value={filters.created_to ?? ''}
          onChange={(value) => setFilters({ created_to: value })}
        />
        {filtered ? (
          <Button
            className="button secondary"
            onPress={() => {
              setSearch('');
              setFilters(Object.fromEntries(FILTERS.map((key) => [key, ''])));
            }}
          >
            {t('clearFilters')}
          </Button>
        ) : null}
      </search>
      <p className="sr-only" role="status" aria-live="polite">
        {announcement}
      </p>
      <PagedTable
        query={list}
        rowsOf={(data) => data.records}
        pages={pages}
        label={t('tableLabel')}
        columns={choice.visible}
        rowId={(r) => r.id}
        rowHref={(r) => `/records/${r.id}`}
        empty={t('noRecords')}
      />
    </section>
  );
}
