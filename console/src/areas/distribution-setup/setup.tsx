// Settings → Distribution (admins): per entity the setup (deadline, redistribution, on/off), its
// participations (with the signing secret shown once) and rules; the account's return reasons.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Button } from 'react-aria-components';
import { ApiError, api, fieldErrors } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { ErrorText, useDescribeError } from '../../ui/errors.tsx';
import { SelectField, TextField } from '../../ui/fields.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { useToast } from '../../ui/toast.tsx';
import {
  type DistributionSetup,
  type EntityListing,
  fetchReturnReasons,
  fetchSetups,
  PARTNERS_KEY,
  type Participation,
  type PartnerPage,
  RETURN_REASONS_KEY,
  type ReturnReason,
  SETUPS_KEY,
} from '../distribution/api.ts';
import { ParticipationsTable, SecretOnce } from '../distribution/participations.tsx';
import { CheckboxField } from '../partners/form.tsx';
import { SettingsNav } from '../settings/parts.tsx';
import { messages } from './messages.ts';
import { integerOrText, ParticipationForm } from './participation-form.tsx';
import { RulesEditor } from './rules.tsx';

export function DistributionSetupPage() {
  const t = useT(messages);
  const entities = useQuery({
    queryKey: ['entities'],
    queryFn: ({ signal }) => api<EntityListing>('/api/v1/entities', { signal }),
  });
  const setups = useQuery({
    queryKey: SETUPS_KEY,
    queryFn: ({ signal }) => fetchSetups(signal),
  });
  const [chosen, setChosen] = useState<string | null>(null);
  const list = entities.data?.entities ?? [];
  const entity = chosen ?? setups.data?.distributions[0]?.entity ?? list[0]?.key ?? null;
  const setup = setups.data?.distributions.find((s) => s.entity === entity) ?? null;
  const fields = list.find((e) => e.key === entity)?.fields ?? [];

  return (
    <section>
      <SettingsNav />
      <PageTitle>{t('title')}</PageTitle>
      {entities.isPending || setups.isPending ? <Loading /> : null}
      <ErrorText error={entities.error ?? setups.error} />
      {entities.data && setups.data && entity ? (
        <>
          <div className="filters">
            <SelectField
              label={t('entity')}
              value={entity}
              onChange={setChosen}
              options={list.map((e) => ({ id: e.key, label: e.label }))}
            />
          </div>
          {setup ? <EntitySetup key={setup.id} setup={setup} fields={fields} /> : <NoSetup entity={entity} />}
        </>
      ) : null}
      <ReturnReasons />
    </section>
  );
}

function NoSetup({ entity }: { entity: string }) {
  const t = useT(messages);
  const toast = useToast();
  const client = useQueryClient();
  const create = useMutation({
    mutationFn: () => api(`/api/v1/settings/distributions/${entity}`, { method: 'PUT', body: {} }),
    onSuccess: () => {
      toast.show(t('setupCreated'));
      void client.invalidateQueries({ queryKey: SETUPS_KEY });
    },
  });
  return (
    <section className="panel">
      <p>{t('noSetup')}</p>
      <ErrorText error={create.error} />
      <Button className="button primary" isDisabled={create.isPending} onPress={() => create.mutate()}>
        {t('createSetup')}
      </Button>
    </section>
  );
}

function EntitySetup({
  setup,
  fields,
}: {
  setup: DistributionSetup;
  fields: EntityListing['entities'][number]['fields'];
}) {
  const t = useT(messages);
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const [deadline, setDeadline] = useState(String(setup.return_deadline_days));
  const [redistribute, setRedistribute] = useState(setup.redistribute_on_return);
  const [enabled, setEnabled] = useState(setup.enabled);
  const [adding, setAdding] = useState(false);
  const [editing, setEditing] = useState<Participation | null>(null);
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null);
  const partners = useQuery({
    queryKey: [...PARTNERS_KEY, 'all'],
    queryFn: ({ signal }) =>
      api<PartnerPage>('/api/v1/distribution/partners', { query: { limit: 500 }, signal }),
  });

  const save = useMutation({
    mutationFn: () =>
      api(`/api/v1/settings/distributions/${setup.entity}`, {
        method: 'PUT',
        body: {
          return_deadline_days: integerOrText(deadline) ?? '',
          redistribute_on_return: redistribute,
          enabled,
        },
      }),
    onSuccess: () => {
      toast.show(t('saved'));
      void client.invalidateQueries({ queryKey: SETUPS_KEY });
    },
  });
  const rotate = useMutation({
    mutationFn: (p: Participation) =>
      api<Participation>(`/api/v1/settings/participations/${p.id}`, {
        method: 'PATCH',
        body: { rotate_secret: true },
      }),
    onSuccess: (answer) => {
      toast.show(t('rotated'));
      if (answer.secret) setSecret({ name: answer.partner_name, secret: answer.secret });
      void client.invalidateQueries({ queryKey: SETUPS_KEY });
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });
  const remove = useMutation({
    mutationFn: (p: Participation) => api(`/api/v1/settings/participations/${p.id}`, { method: 'DELETE' }),
    onSuccess: () => {
      toast.show(t('removed'));
      void client.invalidateQueries({ queryKey: SETUPS_KEY });
    },
    // A rule naming the participation refuses the removal: its details say which rule.
    onError: (error) => {
      const details = Object.values(fieldErrors(error));
      toast.show(details.length > 0 ? details.join('; ') : describe(error), 'error');
    },
  });
  const errors = fieldErrors(save.error);

  return (
    <>
      <form
        className="form panel"
        aria-labelledby="general-title"
        onSubmit={(event) => {
          event.preventDefault();
          save.mutate();
        }}
      >
        <h2 id="general-title">{t('general')}</h2>
        <TextField
          label={t('deadline')}
          description={t('deadlineHint')}
          inputMode="numeric"
          value={deadline}
          onChange={setDeadline}
          error={errors.return_deadline_days}
        />
        <CheckboxField label={t('redistribute')} value={redistribute} onChange={setRedistribute} />
        <CheckboxField label={t('enabled')} value={enabled} onChange={setEnabled} />
        {save.error && Object.keys(errors).length === 0 ? <ErrorText error={save.error} /> : null}
        <div className="row-actions">
          <Button type="submit" className="button primary" isDisabled={save.isPending}>
            {t('save')}
          </Button>
        </div>
      </form>

      <section aria-labelledby="participations-title">
        <h2 id="participations-title">{t('participations')}</h2>
        {secret ? (
          <SecretOnce
            title={t('secretFor', { name: secret.name })}
            secret={secret.secret}
            onHide={() => setSecret(null)}
          />
        ) : null}
        <ParticipationsTable
          participations={setup.participations}
          label={t('participationsLabel', { entity: setup.entity })}
          canManage
          showEntity={false}
          extraActions={(p) => (
            <>
              <Button
                className="button secondary"
                aria-label={t('editLabel', { name: p.partner_name })}
                onPress={() => {
                  setAdding(false);
                  setEditing(p);
                }}
              >
                {t('edit')}
              </Button>
              {p.channel === 'webhook' ? (
                <Button
                  className="button secondary"
                  aria-label={t('rotateLabel', { name: p.partner_name })}
                  isDisabled={rotate.isPending}
                  onPress={() => rotate.mutate(p)}
                >
                  {t('rotate')}
                </Button>
              ) : null}
              <Button
                className="button danger"
                aria-label={t('removeLabel', { name: p.partner_name })}
                isDisabled={remove.isPending}
                onPress={() => remove.mutate(p)}
              >
                {t('remove')}
              </Button>
            </>
          )}
        />
        {adding || editing ? (
          <ParticipationForm
            key={editing?.id ?? 'new'}
            entity={setup.entity}
            partners={partners.data?.partner ?? []}
            participation={editing ?? undefined}
            onDone={(answer) => {
              setAdding(false);
              setEditing(null);
              if (answer?.secret) setSecret({ name: answer.partner_name, secret: answer.secret });
            }}
          />
        ) : (
          <p>
            <Button className="button primary" onPress={() => setAdding(true)}>
              {t('addParticipation')}
            </Button>
          </p>
        )}
      </section>

      <section aria-labelledby="rules-title" className="panel">
        <h2 id="rules-title">{t('rules')}</h2>
        <RulesEditor key={setup.rules.map((r) => r.id).join()} setup={setup} fields={fields} />
      </section>
    </>
  );
}

function ReturnReasons() {
  const t = useT(messages);
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const [name, setName] = useState('');
  const reasons = useQuery({
    queryKey: [...RETURN_REASONS_KEY, 'settings'],
    queryFn: ({ signal }) => fetchReturnReasons('/api/v1/settings/return-reasons', signal),
  });
  const refresh = () => void client.invalidateQueries({ queryKey: RETURN_REASONS_KEY });
  const add = useMutation({
    mutationFn: () =>
      api<ReturnReason>('/api/v1/settings/return-reasons', { method: 'POST', body: { name } }),
    onSuccess: () => {
      toast.show(t('reasonAdded'));
      setName('');
      refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (reason: ReturnReason) =>
      api(`/api/v1/settings/return-reasons/${reason.id}`, { method: 'DELETE' }),
    onSuccess: () => {
      toast.show(t('reasonRemoved'));
      refresh();
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });
  const errors = fieldErrors(add.error);
  if (add.error instanceof ApiError && add.error.code === 'return_reason_taken')
    errors.name = t('reasonTaken');
  return (
    <section className="panel" aria-labelledby="reasons-title">
      <h2 id="reasons-title">{t('returnReasons')}</h2>
      {reasons.isPending ? <Loading /> : null}
      <ErrorText error={reasons.error} />
      {reasons.data?.return_reasons.length === 0 ? <p className="muted">{t('noReasons')}</p> : null}
      <ul className="plain-list" aria-label={t('returnReasonsLabel')}>
        {reasons.data?.return_reasons.map((reason) => (
          <li key={reason.id} className="row-actions spread">
            <span>{reason.name}</span>
            <Button
              className="button danger"
              aria-label={t('removeReason', { name: reason.name })}
              onPress={() => remove.mutate(reason)}
            >
              ×
            </Button>
          </li>
        ))}
      </ul>
      <form
        className="form inline-form"
        onSubmit={(event) => {
          event.preventDefault();
          add.mutate();
        }}
      >
        <TextField label={t('reasonName')} value={name} onChange={setName} error={errors.name} />
        {add.error && Object.keys(errors).length === 0 ? <ErrorText error={add.error} /> : null}
        <div className="row-actions">
          <Button type="submit" className="button secondary" isDisabled={add.isPending}>
            {t('addReason')}
          </Button>
        </div>
      </form>
    </section>
  );
}
