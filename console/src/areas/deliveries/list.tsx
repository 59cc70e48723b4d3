// The delivery list: the filters of GET /api/v1/distribution/deliveries (kept in the address, so
// that a filtered list can be linked), columns the person picks, cursor pages, each delivery's
// attempts, and a return action for roles that may return.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { Button } from 'react-aria-components';
import { Link, useSearchParams } from 'react-router';
import { ApiError, api, fieldErrors } from '../../lib/api.ts';
import { useFormat, useT } from '../../lib/i18n.tsx';
import { useSession } from '../../lib/session.tsx';
import { MessageAttempts } from '../../ui/attempts.tsx';
import { ErrorText, useDescribeError } from '../../ui/errors.tsx';
import { SelectField, TextField } from '../../ui/fields.tsx';
import { PageTitle } from '../../ui/pages.tsx';
import {
  type ColumnDef,
  ColumnPicker,
  PagedTable,
  useColumnChoice,
  useCursorPages,
} from '../../ui/table.tsx';
import { useToast } from '../../ui/toast.tsx';
import {
  DELIVERIES_KEY,
  DELIVERY_STATUSES,
  type Delivery,
  type DeliveryPage,
  fetchReturnReasons,
  PARTNERS_KEY,
  type PartnerPage,
  RETURN_REASONS_KEY,
} from '../distribution/api.ts';
import { distributionMessages } from '../distribution/messages.ts';
import { messages } from './messages.ts';

const PAGE_SIZE = 50;
const ANY = 'any';
const FILTERS = ['status', 'partner_id', 'from', 'to'] as const;

export function DeliveriesList() {
  const t = useT(messages);
  const d = useT(distributionMessages);
  const format = useFormat();
  const session = useSession();
  const mayReturn = session.can('returns:write');
  const [params, setParams] = useSearchParams();
  const filter = Object.fromEntries(FILTERS.map((key) => [key, params.get(key) ?? ''])) as Record<
    (typeof FILTERS)[number],
    string
  >;
  const pages = useCursorPages();
  const [returning, setReturning] = useState<Delivery | null>(null);
  const [inspecting, setInspecting] = useState<Delivery | null>(null);

  const list = useQuery({
    queryKey: [...DELIVERIES_KEY, filter, pages.cursor],
    queryFn: ({ signal }) =>
      api<DeliveryPage>('/api/v1/distribution/deliveries', {
        query: { ...filter, limit: PAGE_SIZE, cursor: pages.cursor },
        signal,
      }),
  });
  const partners = useQuery({
    queryKey: [...PARTNERS_KEY, 'all'],
    queryFn: ({ signal }) =>
      api<PartnerPage>('/api/v1/distribution/partners', { query: { limit: 500 }, signal }),
  });

  const setFilter = (key: (typeof FILTERS)[number], value: string) => {
    const next = new URLSearchParams(params);
    if (value === '' || value === ANY) next.delete(key);
    else next.set(key, value);
    setParams(next, { replace: true });
    pages.reset();
  };

  const columns: ColumnDef<Delivery>[] = [
    {
      id: 'created_at',
      label: t('created'),
      render: (r) => format.dateTime(r.created_at),
      alwaysVisible: true,
    },
    {
      id: 'record',
      label: t('record'),
      // The id's last characters: record ids are time-ordered (UUID version 7), so their first
      // ones are the same for every record of the same minute; the last ones are random.
      render: (r) => (
        <Link to={`/records/${r.record_id}`}>{t('openRecord', { id: r.record_id.slice(-8) })}</Link>
      ),
    },
    {
      id: 'partner',
      label: t('partner'),
      render: (r) => <Link to={`/partners/${r.partner_id}`}>{r.partner}</Link>,
    },
    { id: 'status', label: t('status'), render: (r) => d(`status.${r.status}`) },
    { id: 'price', label: t('price'), render: (r) => format.money(r.price_cents, r.currency) },
    { id: 'rule', label: t('rule'), render: (r) => r.rule, defaultVisible: false },
    { id: 'channel', label: t('channel'), render: (r) => d(`channel.${r.channel}`), defaultVisible: false },
    { id: 'attempts', label: t('attempts'), render: (r) => format.number(r.attempts), defaultVisible: false },
    { id: 'delivered_at', label: t('delivered'), render: (r) => format.dateTime(r.delivered_at) },
    {
      id: 'returned_at',
      label: t('returned'),
      render: (r) => format.dateTime(r.returned_at),
      defaultVisible: false,
    },
    { id: 'error', label: t('error'), render: (r) => r.error ?? '', defaultVisible: false },
    {
      id: 'actions',
      label: t('actions'),
      render: (r: Delivery) => (
        <span className="row-actions">
          <Button
            className="button secondary"
            aria-label={t('attemptsOf', { partner: r.partner, date: format.dateTime(r.created_at) })}
            onPress={() => setInspecting(r)}
          >
            {t('showAttempts')}
          </Button>
          {mayReturn && r.status === 'delivered' ? (
            <Button
              className="button secondary"
              aria-label={t('returnLabel', { partner: r.partner, date: format.dateTime(r.created_at) })}
              onPress={() => setReturning(r)}
            >
              {t('return')}
            </Button>
          ) : null}
        </span>
      ),
    },
  ];
  const choice = useColumnChoice('leadline.deliveries.columns', columns);

  const partnerOptions = [
    { id: ANY, label: t('anyPartner') },
    ...(partners.data?.partner ?? []).map((p) => ({ id: p.id, label: p.name })),
  ];
  if (filter.partner_id && !partnerOptions.some((o) => o.id === filter.partner_id)) {
    const known = list.data?.deliveries.find((r) => r.partner_id === filter.partner_id);
    partnerOptions.push({ id: filter.partner_id, label: known?.partner ?? filter.partner_id });
  }

  return (
    <section>
      <PageTitle actions={<ColumnPicker columns={columns} chosen={choice.chosen} onChange={choice.choose} />}>
        {t('title')}
      </PageTitle>
      <search className="filters" aria-label={t('filters')}>
        <SelectField
          label={t('status')}
          value={filter.status || ANY}
          onChange={(value) => setFilter('status', value)}
          options={[
            { id: ANY, label: t('anyStatus') },
            ...DELIVERY_STATUSES.map((s) => ({ id: s, label: d(`status.${s}`) })),
          ]}
        />
        <SelectField
          label={t('partner')}
          value={filter.partner_id || ANY}
          onChange={(value) => setFilter('partner_id', value)}
          options={partnerOptions}
        />
        <TextField label={t('from')} type="date" value={filter.from} onChange={(v) => setFilter('from', v)} />
        <TextField label={t('to')} type="date" value={filter.to} onChange={(v) => setFilter('to', v)} />
        <Button
          className="button secondary"
          isDisabled={FILTERS.every((key) => filter[key] === '')}
          onPress={() => {
            setParams(new URLSearchParams(), { replace: true });
            pages.reset();
          }}
        >
          {t('clear')}
        </Button>
      </search>
      {returning ? (
        <ReturnPanel key={returning.id} delivery={returning} onDone={() => setReturning(null)} />
      ) : null}
      {inspecting ? (
        <AttemptsPanel key={inspecting.id} delivery={inspecting} onDone={() => setInspecting(null)} />
      ) : null}
      <PagedTable
        query={list}
        rowsOf={(data) => data.deliveries}
        pages={pages}
        label={t('tableLabel')}
        columns={choice.visible}
        rowId={(r) => r.id}
        empty={t('noDeliveries')}
      />
    </section>
  );
}

/** One delivery's attempts (GET /api/v1/distribution/deliveries/{id}/attempts), newest first. */
function AttemptsPanel({ delivery, onDone }: { delivery: Delivery; onDone(): void }) {
  const t = useT(messages);
  const format = useFormat();
  const heading = useRef<HTMLHeadingElement>(null);
  // Opened from a row's button: the panel's title takes the focus, as the return panel's does.
  useEffect(() => heading.current?.focus(), []);
  const title = t('attemptsOf', { partner: delivery.partner, date: format.dateTime(delivery.created_at) });
  return (
    <section className="panel" aria-labelledby="delivery-attempts-panel">
      <div className="page-title">
        <h2 id="delivery-attempts-panel" ref={heading} tabIndex={-1}>
          {title}
        </h2>
        <Button className="button secondary" onPress={onDone}>
          {t('close')}
        </Button>
      </div>
      <MessageAttempts
        url={`/api/v1/distribution/deliveries/${delivery.id}/attempts`}
        queryKey={[...DELIVERIES_KEY, delivery.id, 'attempts']}
        headingId="delivery-attempts"
        headingLevel={3}
      />
    </section>
  );
}

/** Returning one delivery: a reason from the account's list, a note, and the service's answer. */
function ReturnPanel({ delivery, onDone }: { delivery: Delivery; onDone(): void }) {
  const t = useT(messages);
  const format = useFormat();
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const heading = useRef<HTMLHeadingElement>(null);
  const [reason, setReason] = useState(ANY);
  const [text, setText] = useState('');
  const [reportedBy, setReportedBy] = useState('');
  useEffect(() => heading.current?.focus(), []);

  const reasons = useQuery({
    queryKey: RETURN_REASONS_KEY,
    queryFn: ({ signal }) => fetchReturnReasons('/api/v1/distribution/return-reasons', signal),
  });
  const submit = useMutation({
    mutationFn: () =>
      api<{ returned: boolean; redistributed: boolean }>(
        `/api/v1/distribution/deliveries/${delivery.id}/return`,
        {
          method: 'POST',
          body: {
            ...(reason === ANY ? {} : { reason_id: reason }),
            ...(text.trim() === '' ? {} : { text }),
            ...(reportedBy.trim() === '' ? {} : { reported_by: reportedBy }),
          },
        },
      ),
    onSuccess: (answer) => {
      toast.show(answer.redistributed ? t('returnedRedistributed') : t('returnedDone'));
      void client.invalidateQueries({ queryKey: DELIVERIES_KEY });
      onDone();
    },
    onSettled: (_, error) => {
      // A refusal may mean the list is out of date (returned elsewhere): read it again.
      if (error) void client.invalidateQueries({ queryKey: DELIVERIES_KEY });
    },
  });

  const error = submit.error;
  const errors = fieldErrors(error);
  let refusal: string | null = null;
  if (error instanceof ApiError && error.code === 'return_not_allowed') {
    const why = String(error.body.reason ?? '');
    refusal =
      why === 'deadline_passed' || why === 'not_delivered' || why === 'already_returned'
        ? t(`refused.${why}`)
        : t('refused', { reason: error.message });
  } else if (error && Object.keys(errors).length === 0) {
    refusal = describe(error);
  }

  return (
    <section className="panel" aria-labelledby="return-title">
      <h2 id="return-title" tabIndex={-1} ref={heading}>
        {t('returnTitle', { partner: delivery.partner })}
      </h2>
      <p>
        {t('returnIntro', {
          date: format.dateTime(delivery.delivered_at),
          price: format.money(delivery.price_cents, delivery.currency),
        })}
      </p>
      <form
        className="form"
        onSubmit={(event) => {
          event.preventDefault();
          submit.mutate();
        }}
      >
        <div className="grid-2">
          <SelectField
            label={t('reason')}
            value={reason}
            onChange={setReason}
            error={errors.reason_id}
            options={[
              { id: ANY, label: t('noReason') },
              ...(reasons.data?.return_reasons ?? []).map((r) => ({ id: r.id, label: r.name })),
            ]}
          />
          <TextField
            label={t('reportedBy')}
            value={reportedBy}
            onChange={setReportedBy}
            error={errors.reported_by}
          />
        </div>
        <TextField label={t('text')} value={text} onChange={setText} multiline error={errors.text} />
        <ErrorText error={reasons.error} />
        {refusal ? (
          <p className="error-text" role="alert">
            {refusal}
          </p>
        ) : null}
        <div className="row-actions">
          <Button type="submit" className="button primary" isDisabled={submit.isPending}>
            {t('confirmReturn')}
          </Button>
          <Button className="button secondary" onPress={onDone}>
            {t('cancel')}
          </Button>
        </div>
      </form>
    </section>
  );
}
