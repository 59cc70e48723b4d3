import { useQuery } from '@tanstack/react-query';
import { api } from '../../lib/api.ts';
import { useFormat, useT } from '../../lib/i18n.tsx';
import { ErrorText } from '../../ui/errors.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import {
  type ColumnDef,
  ColumnPicker,
  DataTable,
  Pager,
  useColumnChoice,
  useCursorPages,
} from '../../ui/table.tsx';
import type { LeadRecord, RecordPage } from './api.ts';
import { messages } from './messages.ts';

export function RecordsList() {
  const t = useT(messages);
  const format = useFormat();
  const pages = useCursorPages();
  const list = useQuery({
    queryKey: ['records', { cursor: pages.cursor }],
    queryFn: ({ signal }) =>
      api<RecordPage>('/api/v1/records', { query: { limit: 50, cursor: pages.cursor }, signal }),
  });
  const columns: ColumnDef<LeadRecord>[] = [
    { id: 'name', label: t('name'), render: (r) => r.name || r.id, alwaysVisible: true },
    { id: 'entity', label: t('entity'), render: (r) => r.entity },
    { id: 'source', label: t('source'), render: (r) => r.source ?? '' },
    { id: 'stage', label: t('stage'), render: (r) => r.crm?.stage ?? '' },
    { id: 'created_at', label: t('created'), render: (r) => format.dateTime(r.created_at) },
    {
      id: 'updated_at',
      label: t('updated'),
      render: (r) => format.dateTime(r.updated_at),
      defaultVisible: false,
    },
  ];
  const choice = useColumnChoice('leadline.records.columns', columns);
  return (
    <section>
      <PageTitle actions={<ColumnPicker columns={columns} chosen={choice.chosen} onChange={choice.choose} />}>
        {t('title')}
      </PageTitle>
      {list.isPending ? <Loading /> : null}
      <ErrorText error={list.error} />
      {list.data ? (
        <>
          <DataTable
            label={t('tableLabel')}
            columns={choice.visible}
            rows={list.data.records}
            rowId={(r) => r.id}
            rowHref={(r) => `/records/${r.id}`}
          />
          <Pager
            page={pages.page}
            hasNext={Boolean(list.data.next_cursor)}
            onNext={() => list.data?.next_cursor && pages.next(list.data.next_cursor)}
            onPrevious={pages.previous}
          />
        </>
      ) : null}
    </section>
  );
}
