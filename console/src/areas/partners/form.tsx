// Creating and changing a partner through the partners API; the service's 422 details and the
// 409 of a taken name are shown at their fields.
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Button, Checkbox } from 'react-aria-components';
import { Link, useNavigate } from 'react-router';
import { ApiError, api, fieldErrors } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { useDescribeError } from '../../ui/errors.tsx';
import { TextField } from '../../ui/fields.tsx';
import { PageTitle } from '../../ui/pages.tsx';
import { useToast } from '../../ui/toast.tsx';
import { PARTNERS_KEY, type Partner } from '../distribution/api.ts';
import { messages } from './messages.ts';

const TEXT_KEYS = [
  'name',
  'contact_person',
  'email',
  'phone',
  'street',
  'postal_code',
  'city',
  'country',
  'vat_id',
  'buyer_reference',
  'billing_name',
  'billing_street',
  'billing_postal_code',
  'billing_city',
  'billing_country',
  'billing_email',
] as const;
type TextKey = (typeof TEXT_KEYS)[number];
type Values = Record<TextKey, string> & { billing_address_differs: boolean; wants_e_invoice: boolean };

function valuesOf(partner?: Partner): Values {
  const values = Object.fromEntries(
    TEXT_KEYS.map((key) => [key, partner ? ((partner[key] as string | null) ?? '') : '']),
  ) as Record<TextKey, string>;
  return {
    ...values,
    billing_address_differs: partner?.billing_address_differs ?? false,
    wants_e_invoice: partner?.wants_e_invoice ?? false,
  };
}

export function CheckboxField({
  label,
  value,
  onChange,
  isDisabled,
}: {
  label: string;
  value: boolean;
  onChange(value: boolean): void;
  isDisabled?: boolean;
}) {
  return (
    <Checkbox className="checkbox" isSelected={value} onChange={onChange} isDisabled={isDisabled}>
      <span className="checkbox-box" aria-hidden="true" />
      {label}
    </Checkbox>
  );
}

export function NewPartner() {
  const t = useT(messages);
  const navigate = useNavigate();
  return (
    <section>
      <PageTitle>{t('newTitle')}</PageTitle>
      <p>
        <Link to="/partners">{t('back')}</Link>
      </p>
      <PartnerForm onSaved={(id) => navigate(`/partners/${id}`)} />
    </section>
  );
}

export function PartnerForm({ partner, onSaved }: { partner?: Partner; onSaved(id: string): void }) {
  const t = useT(messages);
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const initial = valuesOf(partner);
  const [values, setValues] = useState<Values>(initial);
  const set = <K extends keyof Values>(key: K, value: Values[K]) =>
    setValues((v) => ({ ...v, [key]: value }));

  const save = useMutation({
    mutationFn: () => {
      // A change sends only what changed (a missing key stays as it is); creation sends what is filled in.
      const body: Record<string, unknown> = {};
      for (const key of [...TEXT_KEYS, 'billing_address_differs', 'wants_e_invoice'] as const) {
        const value = key === 'name' ? values.name.trim() : values[key];
        if (partner ? value !== initial[key] : value !== '' && value !== false) body[key] = value;
      }
      if (!partner && body.name === undefined) body.name = '';
      return partner
        ? api<{ id: string }>(`/api/v1/distribution/partners/${partner.id}`, { method: 'PATCH', body })
        : api<{ id: string }>('/api/v1/distribution/partners', { method: 'POST', body });
    },
    onSuccess: (answer) => {
      toast.show(partner ? t('saved') : t('created'));
      void client.invalidateQueries({ queryKey: PARTNERS_KEY });
      onSaved(answer.id);
    },
  });
  const error = save.error;
  const errors = fieldErrors(error);
  if (error instanceof ApiError && error.code === 'partner_name_taken') errors.name = t('nameTaken');
  const general =
    error && Object.keys(errors).length === 0 ? describe(error) : error ? t('checkFields') : null;

  const field = (
    key: TextKey,
    label: string,
    extra: { type?: 'email' | 'tel'; description?: string } = {},
  ) => (
    <TextField
      label={label}
      value={values[key]}
      onChange={(value) => set(key, value)}
      error={errors[key]}
      isRequired={key === 'name'}
      {...extra}
    />
  );

  return (
    <form
      className="form panel"
      aria-label={partner ? partner.name : t('newTitle')}
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <fieldset className="form fieldset">
        <legend>{t('contact')}</legend>
        <div className="grid-2">
          {field('name', t('name'))}
          {field('contact_person', t('contactPerson'))}
          {field('email', t('email'), { type: 'email' })}
          {field('phone', t('phone'), { type: 'tel' })}
        </div>
      </fieldset>
      <fieldset className="form fieldset">
        <legend>{t('address')}</legend>
        <div className="grid-2">
          {field('street', t('street'))}
          {field('postal_code', t('postalCode'))}
          {field('city', t('city'))}
          {field('country', t('country'), { description: t('countryHint') })}
        </div>
      </fieldset>
      <fieldset className="form fieldset">
        <legend>{t('invoicing')}</legend>
        <div className="grid-2">
          {field('vat_id', t('vatId'))}
          {field('buyer_reference', t('buyerReference'))}
        </div>
        <CheckboxField
          label={t('wantsEInvoice')}
          value={values.wants_e_invoice}
          onChange={(v) => set('wants_e_invoice', v)}
        />
        <CheckboxField
          label={t('billingDiffers')}
          value={values.billing_address_differs}
          onChange={(v) => set('billing_address_differs', v)}
        />
        {values.billing_address_differs ? (
          <div className="grid-2">
            {field('billing_name', t('billingName'))}
            {field('billing_street', t('billingStreet'))}
            {field('billing_postal_code', t('billingPostalCode'))}
            {field('billing_city', t('billingCity'))}
            {field('billing_country', t('billingCountry'), { description: t('countryHint') })}
            {field('billing_email', t('billingEmail'), { type: 'email' })}
          </div>
        ) : null}
      </fieldset>
      {general ? (
        <p className="error-text" role="alert">
          {general}
        </p>
      ) : null}
      <div className="row-actions">
        <Button type="submit" className="button primary" isDisabled={save.isPending}>
          {partner ? t('save') : t('create')}
        </Button>
      </div>
    </form>
  );
}
