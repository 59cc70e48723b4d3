// Adding or changing a participation through the settings API: partner, channel, address, price,
// caps, weight, paused and an optional schedule; the service's 422 details at their fields.
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Button, Checkbox, CheckboxGroup, Label } from 'react-aria-components';
import { api, fieldErrors } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { useDescribeError } from '../../ui/errors.tsx';
import { SelectField, TextField } from '../../ui/fields.tsx';
import { useToast } from '../../ui/toast.tsx';
import { type Participation, type Partner, SETUPS_KEY } from '../distribution/api.ts';
import { distributionMessages } from '../distribution/messages.ts';
import { CheckboxField } from '../partners/form.tsx';
import { messages } from './messages.ts';

/** A whole number as a number; other text goes to the service as it is, which names the problem. */
export function integerOrText(text: string): number | string | undefined {
  const trimmed = text.trim();
  if (trimmed === '') return undefined;
  return /^-?\d+$/.test(trimmed) ? Number(trimmed) : trimmed;
}

function centsOf(text: string): number | null {
  const normal = text.trim().replace(/\s/g, '').replace(',', '.');
  if (!/^\d+(\.\d{1,2})?$/.test(normal)) return null;
  return Math.round(Number(normal) * 100);
}

function amountOf(cents: number): string {
  return (cents / 100).toFixed(2);
}

interface Draft {
  partner_id: string | null;
  channel: 'webhook' | 'email';
  address: string;
  price: string;
  currency: string;
  capDay: string;
  capMonth: string;
  weight: string;
  paused: boolean;
  useSchedule: boolean;
  time_zone: string;
  weekdays: string[];
  from: string;
  to: string;
}

function draftOf(p?: Participation): Draft {
  return {
    partner_id: p?.partner_id ?? null,
    channel: p?.channel ?? 'webhook',
    address: p?.address ?? '',
    price: p ? amountOf(p.price_cents) : '',
    currency: p?.currency ?? 'EUR',
    capDay: p?.caps.day?.toString() ?? '',
    capMonth: p?.caps.month?.toString() ?? '',
    weight: p?.weight.toString() ?? '1',
    paused: p?.paused ?? false,
    useSchedule: Boolean(p?.schedule),
    time_zone: p?.schedule?.time_zone ?? Intl.DateTimeFormat().resolvedOptions().timeZone ?? 'UTC',
    weekdays: (p?.schedule?.weekdays ?? [1, 2, 3, 4, 5]).map(String),
    from: p?.schedule?.from ?? '08:00',
    to: p?.schedule?.to ?? '18:00',
  };
}

export function ParticipationForm({
  entity,
  partners,
  participation,
  onDone,
}: {
  entity: string;
  partners: readonly Partner[];
  participation?: Participation;
  onDone(answer: Participation | null): void;
}) {
  const t = useT(messages);
  const d = useT(distributionMessages);
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const [draft, setDraft] = useState<Draft>(() => draftOf(participation));
  const [priceError, setPriceError] = useState<string | null>(null);
  const set = <K extends keyof Draft>(key: K, value: Draft[K]) => setDraft((v) => ({ ...v, [key]: value }));

  const save = useMutation({
    mutationFn: (priceCents: number) => {
      const caps = { day: integerOrText(draft.capDay), month: integerOrText(draft.capMonth) };
      const schedule = draft.useSchedule
        ? {
            time_zone: draft.time_zone,
            weekdays: draft.weekdays.map(Number).sort(),
            from: draft.from,
            to: draft.to,
          }
        : null;
      const body: Record<string, unknown> = {
        partner_id: draft.partner_id ?? '',
        channel: draft.channel,
        address: draft.address.trim(),
        price_cents: priceCents,
        currency: draft.currency.trim(),
        weight: integerOrText(draft.weight),
        paused: draft.paused,
      };
      if (participation) {
        body.caps = { day: caps.day ?? null, month: caps.month ?? null };
        body.schedule = schedule;
        return api<Participation>(`/api/v1/settings/participations/${participation.id}`, {
          method: 'PATCH',
          body,
        });
      }
      if (caps.day !== undefined || caps.month !== undefined)
        body.caps = Object.fromEntries(Object.entries(caps).filter(([, v]) => v !== undefined));
      if (schedule) body.schedule = schedule;
      return api<Participation>(`/api/v1/settings/distributions/${entity}/participations`, {
        method: 'POST',
        body,
      });
    },
    onSuccess: (answer) => {
      toast.show(participation ? t('updated') : t('created'));
      void client.invalidateQueries({ queryKey: SETUPS_KEY });
      onDone(answer);
    },
  });
  const errors = fieldErrors(save.error);
  const general =
    save.error && Object.keys(errors).length === 0
      ? describe(save.error)
      : save.error
        ? t('checkFields')
        : null;
  const partnerOptions = partners.map((p) => ({ id: p.id, label: p.name }));
  if (participation && !partnerOptions.some((o) => o.id === participation.partner_id))
    partnerOptions.push({ id: participation.partner_id, label: participation.partner_name });

  return (
    <form
      className="form panel"
      aria-label={
        participation ? t('editParticipation', { name: participation.partner_name }) : t('addParticipation')
      }
      onSubmit={(event) => {
        event.preventDefault();
        const cents = centsOf(draft.price);
        setPriceError(cents === null ? t('priceInvalid') : null);
        if (cents !== null) save.mutate(cents);
      }}
    >
      <h3>
        {participation ? t('editParticipation', { name: participation.partner_name }) : t('addParticipation')}
      </h3>
      <div className="grid-2">
        <SelectField
          label={t('partner')}
          placeholder={t('choosePartner')}
          value={draft.partner_id}
          onChange={(v) => set('partner_id', v)}
          options={partnerOptions}
          error={errors.partner_id}
          isRequired
        />
        <SelectField
          label={t('channel')}
          value={draft.channel}
          onChange={(v) => set('channel', v as Draft['channel'])}
          options={[
            { id: 'webhook', label: d('channel.webhook') },
            { id: 'email', label: d('channel.email') },
          ]}
          error={errors.channel}
        />
        <TextField
          label={t('address')}
          description={t('addressHint')}
          value={draft.address}
          onChange={(v) => set('address', v)}
          error={errors.address}
          isRequired
        />
        <TextField
          label={t('price')}
          description={t('priceHint')}
          inputMode="decimal"
          value={draft.price}
          onChange={(v) => set('price', v)}
          error={priceError ?? errors.price_cents}
          isRequired
        />
        <TextField
          label={t('currency')}
          value={draft.currency}
          onChange={(v) => set('currency', v)}
          error={errors.currency}
        />
        <TextField
          label={t('weight')}
          description={t('weightHint')}
          inputMode="numeric"
          value={draft.weight}
          onChange={(v) => set('weight', v)}
          error={errors.weight}
        />
        <TextField
          label={t('capDay')}
          description={t('capHint')}
          inputMode="numeric"
          value={draft.capDay}
          onChange={(v) => set('capDay', v)}
          error={errors['caps.day'] ?? errors.caps}
        />
        <TextField
          label={t('capMonth')}
          description={t('capHint')}
          inputMode="numeric"
          value={draft.capMonth}
          onChange={(v) => set('capMonth', v)}
          error={errors['caps.month']}
        />
      </div>
      <CheckboxField label={t('paused')} value={draft.paused} onChange={(v) => set('paused', v)} />
      <CheckboxField
        label={t('useSchedule')}
        value={draft.useSchedule}
        onChange={(v) => set('useSchedule', v)}
      />
      {draft.useSchedule ? (
        <div className="grid-2">
          <TextField
            label={t('timeZone')}
            value={draft.time_zone}
            onChange={(v) => set('time_zone', v)}
            error={errors['schedule.time_zone'] ?? errors.schedule}
          />
          <CheckboxGroup
            className="checkbox-group weekdays"
            value={draft.weekdays}
            onChange={(v) => set('weekdays', v)}
            isInvalid={Boolean(errors['schedule.weekdays'])}
          >
            <Label>{t('weekdays')}</Label>
            {[1, 2, 3, 4, 5, 6, 7].map((day) => (
              <Checkbox key={day} value={String(day)} className="checkbox">
                <span className="checkbox-box" aria-hidden="true" />
                {d(`weekday${day}` as 'weekday1')}
              </Checkbox>
            ))}
            {errors['schedule.weekdays'] ? <p className="error-text">{errors['schedule.weekdays']}</p> : null}
          </CheckboxGroup>
          <TextField
            label={t('from')}
            value={draft.from}
            onChange={(v) => set('from', v)}
            error={errors['schedule.from']}
          />
          <TextField
            label={t('to')}
            value={draft.to}
            onChange={(v) => set('to', v)}
            error={errors['schedule.to']}
          />
        </div>
      ) : null}
      {general ? (
        <p className="error-text" role="alert">
          {general}
        </p>
      ) : null}
      <div className="row-actions">
        <Button type="submit" className="button primary" isDisabled={save.isPending}>
          {participation ? t('update') : t('create')}
        </Button>
        <Button className="button secondary" onPress={() => onDone(null)}>
          {t('cancel')}
        </Button>
      </div>
    </form>
  );
}
