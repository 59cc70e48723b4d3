// One partner: what its invoices still miss, its data (a form for admins), retiring and bringing
// back, and its participations with pause/resume and the test delivery (admins).
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Button } from 'react-aria-components';
import { Link, useParams } from 'react-router';
import { ApiError, api } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { useSession } from '../../lib/session.tsx';
import { ErrorText, useDescribeError } from '../../ui/errors.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { useToast } from '../../ui/toast.tsx';
import { fetchSetups, PARTNERS_KEY, type Partner, SETUPS_KEY } from '../distribution/api.ts';
import { distributionMessages } from '../distribution/messages.ts';
import { ParticipationsTable } from '../distribution/participations.tsx';
import { PartnerForm } from './form.tsx';
import { gapText } from './list.tsx';
import { messages } from './messages.ts';

export function PartnerPage() {
  const { id = '' } = useParams();
  const t = useT(messages);
  const d = useT(distributionMessages);
  const session = useSession();
  const isAdmin = session.can('settings');
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const partner = useQuery({
    queryKey: [...PARTNERS_KEY, 'one', id],
    queryFn: ({ signal }) => api<Partner>(`/api/v1/distribution/partners/${id}`, { signal }),
  });
  const setups = useQuery({
    queryKey: SETUPS_KEY,
    queryFn: ({ signal }) => fetchSetups(signal),
    enabled: isAdmin,
  });
  const retire = useMutation({
    mutationFn: (retired: boolean) =>
      retired
        ? api(`/api/v1/distribution/partners/${id}`, { method: 'DELETE' })
        : api(`/api/v1/distribution/partners/${id}`, { method: 'PATCH', body: { retired: false } }),
    onSuccess: (_, retired) => {
      toast.show(retired ? t('retired') : t('broughtBack'));
      void client.invalidateQueries({ queryKey: PARTNERS_KEY });
      void client.invalidateQueries({ queryKey: SETUPS_KEY });
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });

  if (partner.error instanceof ApiError && partner.error.status === 404) throw partner.error;
  if (partner.isPending) return <Loading />;
  if (!partner.data) return <ErrorText error={partner.error} />;
  const p = partner.data;
  const participations = (setups.data?.distributions ?? []).flatMap((s) =>
    s.participations.filter((item) => item.partner_id === p.id),
  );

  return (
    <section>
      <PageTitle
        actions={
          isAdmin ? (
            <Button
              className={`button ${p.retired ? 'primary' : 'danger'}`}
              isDisabled={retire.isPending}
              onPress={() => retire.mutate(!p.retired)}
            >
              {p.retired ? t('bringBack') : t('retire')}
            </Button>
          ) : null
        }
      >
        {p.name}
        {p.retired ? <span className="badge"> ({t('retiredBadge')})</span> : null}
      </PageTitle>
      <p className="row-actions">
        <Link to="/partners">{t('back')}</Link>
        <Link to={`/deliveries?partner_id=${p.id}`}>{t('deliveriesOf')}</Link>
      </p>
      {p.retired ? <p className="notice">{t('retiredNote')}</p> : null}
      <section className="panel" aria-labelledby="gaps-title">
        <h2 id="gaps-title">{t('gaps')}</h2>
        {p.gaps.length === 0 ? (
          <p>{t('complete')}</p>
        ) : (
          <ul data-testid="gaps">
            {p.gaps.map((gap) => (
              <li key={gap}>{d(`gap.${gap}` as 'gap.street')}</li>
            ))}
          </ul>
        )}
      </section>
      {isAdmin ? (
        <PartnerForm key={p.updated_at} partner={p} onSaved={() => void partner.refetch()} />
      ) : (
        <section className="panel">
          <dl className="facts">
            <dt>{t('contactPerson')}</dt>
            <dd>{p.contact_person}</dd>
            <dt>{t('email')}</dt>
            <dd>{p.email}</dd>
            <dt>{t('phone')}</dt>
            <dd>{p.phone}</dd>
            <dt>{t('address')}</dt>
            <dd>{[p.street, `${p.postal_code} ${p.city}`.trim(), p.country].filter(Boolean).join(', ')}</dd>
            <dt>{t('vatId')}</dt>
            <dd>{p.vat_id}</dd>
            <dt>{t('gaps')}</dt>
            <dd>{gapText(p.gaps, d as never, t('complete'))}</dd>
          </dl>
        </section>
      )}
      <section aria-labelledby="participations-title">
        <h2 id="participations-title">{d('participations')}</h2>
        {isAdmin ? (
          <>
            {setups.isPending ? <Loading /> : null}
            <ErrorText error={setups.error} />
            {setups.data ? (
              <ParticipationsTable
                participations={participations}
                label={d('participationsLabel', { name: p.name })}
                canManage
                showPartner={false}
              />
            ) : null}
            <p>
              <Link to="/settings/distribution">{t('setupLink')}</Link>
            </p>
          </>
        ) : (
          <p className="muted">{t('participationsAdminOnly')}</p>
        )}
      </section>
    </section>
  );
}
