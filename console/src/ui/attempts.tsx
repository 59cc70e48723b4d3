// Attempts to send outbound messages, newest first, paged: an account webhook's
// (GET /api/v1/settings/webhooks/{id}/attempts) or an automation's
// (GET /api/v1/settings/automations/{id}/attempts); both answer the same items.
import { useQuery } from '@tanstack/react-query';
import { Button } from 'react-aria-components';
import { api } from '../lib/api.ts';
import { defineMessages, useFormat, useT } from '../lib/i18n.tsx';
import { type ColumnDef, PagedTable, useCursorPages } from './table.tsx';

export interface MessageAttempt {
  id: string;
  message_id: string;
  event: string;
  attempt: number;
  outcome: 'delivered' | 'failed';
  status_code: number | null;
  response: string | null;
  error: string | null;
  duration_ms: number;
  attempted_at: string;
}

const messages = defineMessages(
  {
    attempts: 'Recent attempts',
    noAttempts: 'No attempts yet.',
    refresh: 'Refresh',
    time: 'Time',
    event: 'Event',
    attemptNo: 'Attempt',
    outcome: 'Outcome',
    delivered: 'delivered',
    failed: 'failed',
    responseCode: 'Response code',
    duration: 'Duration',
    ms: '{ms} ms',
    error: 'Error',
  },
  {
    attempts: 'Letzte Zustellversuche',
    noAttempts: 'Noch keine Versuche.',
    refresh: 'Aktualisieren',
    time: 'Zeit',
    event: 'Ereignis',
    attemptNo: 'Versuch',
    outcome: 'Ergebnis',
    delivered: 'zugestellt',
    failed: 'fehlgeschlagen',
    responseCode: 'Antwortcode',
    duration: 'Dauer',
    ms: '{ms} ms',
    error: 'Fehler',
  },
);

/** The attempts listed at `url` (a path answering `{attempts, next_cursor}`), 25 a page. */
export function MessageAttempts({
  url,
  queryKey,
  headingId,
  headingLevel = 2,
}: {
  url: string;
  queryKey: readonly unknown[];
  headingId: string;
  headingLevel?: 2 | 3;
}) {
  const t = useT(messages);
  const format = useFormat();
  const pages = useCursorPages();
  const attempts = useQuery({
    queryKey: [...queryKey, pages.cursor],
    queryFn: ({ signal }) =>
      api<{ attempts: MessageAttempt[]; next_cursor: string | null }>(url, {
        query: { limit: 25, cursor: pages.cursor },
        signal,
      }),
  });
  const columns: ColumnDef<MessageAttempt>[] = [
    { id: 'time', label: t('time'), render: (a) => format.dateTime(a.attempted_at), alwaysVisible: true },
    { id: 'event', label: t('event'), render: (a) => <code>{a.event}</code> },
    { id: 'attempt', label: t('attemptNo'), render: (a) => a.attempt },
    {
      id: 'outcome',
      label: t('outcome'),
      render: (a) => (a.outcome === 'delivered' ? t('delivered') : t('failed')),
    },
    { id: 'status', label: t('responseCode'), render: (a) => a.status_code ?? '—' },
    { id: 'duration', label: t('duration'), render: (a) => t('ms', { ms: a.duration_ms }) },
    { id: 'error', label: t('error'), render: (a) => a.error ?? '' },
  ];
  const Heading = headingLevel === 2 ? 'h2' : 'h3';
  return (
    <section aria-labelledby={headingId}>
      <div className="page-title">
        <Heading id={headingId}>{t('attempts')}</Heading>
        <Button className="button secondary" onPress={() => void attempts.refetch()}>
          {t('refresh')}
        </Button>
      </div>
      <PagedTable
        query={attempts}
        rowsOf={(data) => data.attempts}
        pages={pages}
        label={t('attempts')}
        columns={columns}
        rowId={(a) => a.id}
        empty={t('noAttempts')}
      />
    </section>
  );
}
