// Participations as a table with their actions (pause/resume, test delivery, and on the setup
// page edit, rotate and remove), the test delivery's result, and a secret shown once.
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useEffect, useRef, useState } from 'react';
import { Button } from 'react-aria-components';
import { api } from '../../lib/api.ts';
import { useFormat, useT } from '../../lib/i18n.tsx';
import { useDescribeError } from '../../ui/errors.tsx';
import { useToast } from '../../ui/toast.tsx';
import { type Participation, SETUPS_KEY, type TestResult } from './api.ts';
import { distributionMessages } from './messages.ts';

export function useDistributionText() {
  const t = useT(distributionMessages);
  const format = useFormat();
  return {
    t,
    caps: (p: Participation) =>
      p.caps.day === null && p.caps.month === null
        ? t('noCap')
        : t('capsValue', {
            day: p.caps.day === null ? '–' : format.number(p.caps.day),
            month: p.caps.month === null ? '–' : format.number(p.caps.month),
          }),
    schedule: (p: Participation) =>
      p.schedule
        ? `${p.schedule.weekdays.map((d) => t(`weekday${d}` as 'weekday1')).join(', ')} ${p.schedule.from}–${p.schedule.to} (${p.schedule.time_zone})`
        : t('always'),
    state: (p: Participation) =>
      p.paused ? (p.paused_reason === 'gone' ? t('pausedGone') : t('paused')) : t('active'),
  };
}

export function ParticipationsTable({
  participations,
  label,
  canManage,
  showPartner = true,
  showEntity = true,
  extraActions,
}: {
  participations: readonly Participation[];
  label: string;
  /** Pause, resume and test (the settings API and the test call are admins'). */
  canManage: boolean;
  showPartner?: boolean;
  showEntity?: boolean;
  extraActions?: (p: Participation) => ReactNode;
}) {
  const { t, caps, schedule, state } = useDistributionText();
  const format = useFormat();
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const [result, setResult] = useState<{ participation: Participation; result: TestResult } | null>(null);

  const pause = useMutation({
    mutationFn: (input: { p: Participation; paused: boolean }) =>
      api<Participation>(`/api/v1/settings/participations/${input.p.id}`, {
        method: 'PATCH',
        body: { paused: input.paused },
      }),
    onSuccess: (_, input) => {
      toast.show(input.paused ? t('pausedDone') : t('resumedDone'));
      void client.invalidateQueries({ queryKey: SETUPS_KEY });
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });
  const test = useMutation({
    mutationFn: (p: Participation) =>
      api<TestResult>(`/api/v1/distribution/participations/${p.id}/test`, { method: 'POST' }),
    onMutate: () => setResult(null),
    onSuccess: (answer, p) => setResult({ participation: p, result: answer }),
    onError: (error) => toast.show(describe(error), 'error'),
  });

  if (participations.length === 0) return <p className="muted">{t('noParticipations')}</p>;
  return (
    <>
      <div className="table-scroll">
        <table className="table" aria-label={label}>
          <thead>
            <tr>
              {showPartner ? <th scope="col">{t('partner')}</th> : null}
              {showEntity ? <th scope="col">{t('entity')}</th> : null}
              <th scope="col">{t('channel')}</th>
              <th scope="col">{t('address')}</th>
              <th scope="col">{t('price')}</th>
              <th scope="col">{t('caps')}</th>
              <th scope="col">{t('schedule')}</th>
              <th scope="col">{t('weight')}</th>
              <th scope="col">{t('state')}</th>
              {canManage ? <th scope="col">{t('actions')}</th> : null}
            </tr>
          </thead>
          <tbody>
            {participations.map((p) => (
              <tr key={p.id}>
                {showPartner ? <td>{p.partner_name}</td> : null}
                {showEntity ? <td>{p.entity}</td> : null}
                <td>{t(`channel.${p.channel}`)}</td>
                <td className="wrap-anywhere">{p.address}</td>
                <td>{format.money(p.price_cents, p.currency)}</td>
                <td>{caps(p)}</td>
                <td>{schedule(p)}</td>
                <td>{p.weight}</td>
                <td>{state(p)}</td>
                {canManage ? (
                  <td>
                    <div className="row-actions">
                      <Button
                        className="button secondary"
                        aria-label={t(p.paused ? 'resumeLabel' : 'pauseLabel', {
                          name: p.partner_name,
                          entity: p.entity,
                        })}
                        isDisabled={pause.isPending}
                        onPress={() => pause.mutate({ p, paused: !p.paused })}
                      >
                        {p.paused ? t('resume') : t('pause')}
                      </Button>
                      <Button
                        className="button secondary"
                        aria-label={t('testLabel', { address: p.address })}
                        isDisabled={test.isPending}
                        onPress={() => test.mutate(p)}
                      >
                        {t('test')}
                      </Button>
                      {extraActions?.(p)}
                    </div>
                  </td>
                ) : null}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {test.isPending ? (
        <p className="loading" role="status">
          {t('testSending')}
        </p>
      ) : null}
      {result ? <TestResultPanel result={result.result} onHide={() => setResult(null)} /> : null}
    </>
  );
}

export function TestResultPanel({ result, onHide }: { result: TestResult; onHide(): void }) {
  const t = useT(distributionMessages);
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  return (
    <section
      className={`panel test-result ${result.ok ? 'ok' : 'failed'}`}
      aria-labelledby="test-result-title"
    >
      <h3 id="test-result-title" tabIndex={-1} ref={heading}>
        {t('testResult')}: {result.ok ? t('testOk') : t('testFailed')}
      </h3>
      <dl className="facts">
        <dt>{t('testRequest')}</dt>
        <dd>{result.request.url}</dd>
        <dt>{t('testStatus')}</dt>
        <dd>{result.status}</dd>
        <dt>{t('testMessage')}</dt>
        <dd>{result.message}</dd>
        <dt>{t('testResponse')}</dt>
        <dd>
          <pre className="pre">{result.response}</pre>
        </dd>
        <dt>{t('testBody')}</dt>
        <dd>
          <pre className="pre">{result.request.body}</pre>
        </dd>
      </dl>
      <Button className="button secondary" onPress={onHide}>
        {t('hide')}
      </Button>
    </section>
  );
}

/** A secret the service answers once (creation, rotation): shown with a copy button. */
export function SecretOnce({ title, secret, onHide }: { title: string; secret: string; onHide(): void }) {
  const t = useT(distributionMessages);
  const toast = useToast();
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  return (
    <section className="panel secret-once" aria-labelledby="secret-once-title">
      <h3 id="secret-once-title" tabIndex={-1} ref={heading}>
        {title}
      </h3>
      <p>{t('secretOnce')}</p>
      <p>
        <code className="secret" data-testid="secret">
          {secret}
        </code>
      </p>
      <div className="row-actions">
        <Button
          className="button primary"
          onPress={() =>
            void navigator.clipboard.writeText(secret).then(
              () => toast.show(t('copied')),
              () => toast.show(t('copyFailed'), 'error'),
            )
          }
        >
          {t('copy')}
        </Button>
        <Button className="button secondary" onPress={onHide}>
          {t('hide')}
        </Button>
      </div>
    </section>
  );
}
