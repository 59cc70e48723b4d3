import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router';
import { api } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { useSession } from '../../lib/session.tsx';
import { TextField } from '../../ui/fields.tsx';
import { PageTitle } from '../../ui/pages.tsx';
import {
  type ColumnDef,
  ColumnPicker,
  PagedTable,
  useColumnChoice,
  useCursorPages,
} from '../../ui/table.tsx';
import { PARTNERS_KEY, type Partner, type PartnerPage } from '../distribution/api.ts';
import { distributionMessages } from '../distribution/messages.ts';
import { messages } from './messages.ts';

export function gapText(gaps: readonly string[], d: (key: never) => string, complete: string): string {
  return gaps.length === 0 ? complete : gaps.map((gap) => d(`gap.${gap}` as never)).join(', ');
}

export function PartnersList() {
  const t = useT(messages);
  const d = useT(distributionMessages);
  const session = useSession();
  const pages = useCursorPages();
  const [q, setQ] = useState('');
  const list = useQuery({
    queryKey: [...PARTNERS_KEY, { q, cursor: pages.cursor }],
    queryFn: ({ signal }) =>
      api<PartnerPage>('/api/v1/distribution/partners', {
        query: { q, limit: 50, cursor: pages.cursor },
        signal,
      }),
  });
  const columns: ColumnDef<Partner>[] = [
    { id: 'name', label: t('name'), render: (p) => p.name, alwaysVisible: true },
    { id: 'contact_person', label: t('contactPerson'), render: (p) => p.contact_person },
    { id: 'email', label: t('email'), render: (p) => p.email },
    { id: 'phone', label: t('phone'), render: (p) => p.phone, defaultVisible: false },
    { id: 'city', label: t('city'), render: (p) => p.city },
    { id: 'country', label: t('country'), render: (p) => p.country },
    { id: 'vat_id', label: t('vatId'), render: (p) => p.vat_id, defaultVisible: false },
    { id: 'gaps', label: t('gaps'), render: (p) => gapText(p.gaps, d as never, t('complete')) },
  ];
  const choice = useColumnChoice('leadline.partners.columns', columns);
  return (
    <section>
      <PageTitle
        actions={
          <>
            {session.can('settings') ? (
              <Link className="button primary" to="/partners/new">
                {t('newPartner')}
              </Link>
            ) : null}
            <ColumnPicker columns={columns} chosen={choice.chosen} onChange={choice.choose} />
          </>
        }
      >
        {t('title')}
      </PageTitle>
      <div className="filters">
        <TextField
          label={t('search')}
          description={t('searchHint')}
          type="search"
          value={q}
          onChange={(value) => {
            setQ(value);
            pages.reset();
          }}
        />
      </div>
      <PagedTable
        query={list}
        rowsOf={(data) => data.partner}
        pages={pages}
        label={t('tableLabel')}
        columns={choice.visible}
        rowId={(p) => p.id}
        rowHref={(p) => `/partners/${p.id}`}
      />
    </section>
  );
}
