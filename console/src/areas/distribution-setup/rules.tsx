// The rules of a distribution, edited as a whole and saved with one PUT (they replace the old
// ones, in the order shown); the service's 422 details at the rule and condition they name.
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Button, Checkbox, CheckboxGroup, Label } from 'react-aria-components';
import { api, fieldErrors } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { useDescribeError } from '../../ui/errors.tsx';
import { SelectField, TextField } from '../../ui/fields.tsx';
import { useToast } from '../../ui/toast.tsx';
import {
  type DistributionSetup,
  FILTER_OPS,
  type Rule,
  type RuleFilter,
  SETUPS_KEY,
  STRATEGIES,
} from '../distribution/api.ts';
import { messages } from './messages.ts';
import { integerOrText } from './participation-form.tsx';

interface ConditionDraft {
  key: number;
  field: string | null;
  op: RuleFilter['op'];
  value: string;
  min: string;
  max: string;
}

interface RuleDraft {
  key: number;
  name: string;
  strategy: string;
  maxPartners: string;
  participationIds: string[];
  filter: ConditionDraft[];
}

let nextKey = 1;

function text(value: unknown): string {
  return value === undefined || value === null ? '' : String(value);
}

function conditionOf(f: RuleFilter): ConditionDraft {
  return {
    key: nextKey++,
    field: f.field,
    op: f.op,
    value:
      f.op === 'in'
        ? (f.values ?? []).map(text).join(', ')
        : f.op === 'postal_prefix'
          ? text(f.prefix)
          : text(f.value),
    min: text(f.min),
    max: text(f.max),
  };
}

function draftOf(rule: Rule): RuleDraft {
  return {
    key: nextKey++,
    name: rule.name,
    strategy: rule.strategy,
    maxPartners: String(rule.max_partners),
    participationIds: rule.participation_ids,
    filter: rule.filter.map(conditionOf),
  };
}

/** A number where the text is one, else the text (the service compares numbers and text alike). */
function scalar(value: string): string | number {
  const trimmed = value.trim();
  return trimmed !== '' && !Number.isNaN(Number(trimmed)) ? Number(trimmed) : trimmed;
}

function conditionBody(c: ConditionDraft): Record<string, unknown> {
  const base = { field: c.field ?? '', op: c.op };
  switch (c.op) {
    case 'equals':
      return { ...base, value: scalar(c.value) };
    case 'in':
      return {
        ...base,
        values: c.value
          .split(',')
          .map((v) => v.trim())
          .filter((v) => v !== '')
          .map(scalar),
      };
    case 'range':
      return {
        ...base,
        ...(c.min.trim() === '' ? {} : { min: scalar(c.min) }),
        ...(c.max.trim() === '' ? {} : { max: scalar(c.max) }),
      };
    default:
      return { ...base, prefix: c.value.trim() };
  }
}

export function RulesEditor({
  setup,
  fields,
}: {
  setup: DistributionSetup;
  fields: readonly { key: string; label: string }[];
}) {
  const t = useT(messages);
  const toast = useToast();
  const describe = useDescribeError();
  const client = useQueryClient();
  const [rules, setRules] = useState<RuleDraft[]>(() => setup.rules.map(draftOf));
  const change = (index: number, patch: Partial<RuleDraft>) =>
    setRules((list) => list.map((rule, i) => (i === index ? { ...rule, ...patch } : rule)));
  const changeCondition = (index: number, at: number, patch: Partial<ConditionDraft>) =>
    change(index, {
      filter: rules[index]!.filter.map((c, i) => (i === at ? { ...c, ...patch } : c)),
    });

  const save = useMutation({
    mutationFn: () =>
      api<Rule[]>(`/api/v1/settings/distributions/${setup.entity}/rules`, {
        method: 'PUT',
        body: rules.map((rule) => ({
          name: rule.name.trim(),
          strategy: rule.strategy,
          ...(rule.maxPartners.trim() === '' ? {} : { max_partners: integerOrText(rule.maxPartners) }),
          participation_ids: rule.participationIds,
          filter: rule.filter.map(conditionBody),
        })),
      }),
    onSuccess: (answer) => {
      toast.show(t('rulesSaved'));
      setRules(answer.map(draftOf));
      void client.invalidateQueries({ queryKey: SETUPS_KEY });
    },
  });
  const errors = fieldErrors(save.error);
  const general =
    save.error && Object.keys(errors).length === 0
      ? describe(save.error)
      : save.error
        ? t('checkFields')
        : null;
  const fieldOptions = fields.map((f) => ({ id: f.key, label: f.label }));

  return (
    <form
      className="form"
      aria-label={t('rules')}
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <p className="muted">{t('rulesIntro')}</p>
      {rules.map((rule, index) => {
        const n = index + 1;
        const at = (key: string) => errors[`${index}.${key}`];
        return (
          <fieldset key={rule.key} className="form fieldset">
            <legend>{t('rule', { n })}</legend>
            <div className="grid-2">
              <TextField
                label={t('ruleName')}
                value={rule.name}
                onChange={(v) => change(index, { name: v })}
                error={at('name')}
                isRequired
              />
              <SelectField
                label={t('strategy')}
                value={rule.strategy}
                onChange={(v) => change(index, { strategy: v })}
                options={STRATEGIES.map((s) => ({ id: s, label: t(`strategy.${s}`) }))}
                error={at('strategy')}
              />
              <TextField
                label={t('maxPartners')}
                inputMode="numeric"
                value={rule.maxPartners}
                onChange={(v) => change(index, { maxPartners: v })}
                error={at('max_partners')}
              />
            </div>
            <CheckboxGroup
              className="checkbox-group"
              value={rule.participationIds}
              onChange={(v) => change(index, { participationIds: v })}
              isInvalid={Boolean(at('participation_ids'))}
            >
              <Label>{t('ruleParticipations')}</Label>
              {setup.participations.map((p) => (
                <Checkbox key={p.id} value={p.id} className="checkbox">
                  <span className="checkbox-box" aria-hidden="true" />
                  {p.partner_name} ({p.channel}, {p.address})
                </Checkbox>
              ))}
              {at('participation_ids') ? <p className="error-text">{at('participation_ids')}</p> : null}
            </CheckboxGroup>
            <h3>{t('filter')}</h3>
            {rule.filter.length === 0 ? <p className="muted">{t('noFilter')}</p> : null}
            {rule.filter.map((c, ci) => {
              const cat = (key: string) => errors[`${index}.filter.${ci}.${key}`];
              const valueKey = c.op === 'in' ? 'values' : c.op === 'postal_prefix' ? 'prefix' : 'value';
              return (
                <div key={c.key} className="filters condition">
                  <SelectField
                    label={t('field')}
                    value={c.field}
                    onChange={(v) => changeCondition(index, ci, { field: v })}
                    options={fieldOptions}
                    error={cat('field')}
                  />
                  <SelectField
                    label={t('op')}
                    value={c.op}
                    onChange={(v) => changeCondition(index, ci, { op: v as RuleFilter['op'] })}
                    options={FILTER_OPS.map((op) => ({ id: op, label: t(`op.${op}`) }))}
                    error={cat('op')}
                  />
                  {c.op === 'range' ? (
                    <>
                      <TextField
                        label={t('min')}
                        value={c.min}
                        onChange={(v) => changeCondition(index, ci, { min: v })}
                        error={cat('min')}
                      />
                      <TextField
                        label={t('max')}
                        value={c.max}
                        onChange={(v) => changeCondition(index, ci, { max: v })}
                        error={cat('max')}
                      />
                    </>
                  ) : (
                    <TextField
                      label={
                        c.op === 'in' ? t('values') : c.op === 'postal_prefix' ? t('prefix') : t('value')
                      }
                      value={c.value}
                      onChange={(v) => changeCondition(index, ci, { value: v })}
                      error={cat(valueKey)}
                    />
                  )}
                  <Button
                    className="button danger"
                    aria-label={t('removeCondition', { n: ci + 1 })}
                    onPress={() => change(index, { filter: rule.filter.filter((_, i) => i !== ci) })}
                  >
                    ×
                  </Button>
                </div>
              );
            })}
            <div className="row-actions">
              <Button
                className="button secondary"
                onPress={() =>
                  change(index, {
                    filter: [
                      ...rule.filter,
                      {
                        key: nextKey++,
                        field: fields[0]?.key ?? null,
                        op: 'equals',
                        value: '',
                        min: '',
                        max: '',
                      },
                    ],
                  })
                }
              >
                {t('addCondition')}
              </Button>
              {index > 0 ? (
                <Button
                  className="button secondary"
                  aria-label={t('moveUp', { n })}
                  onPress={() =>
                    setRules((list) => {
                      const copy = [...list];
                      [copy[index - 1], copy[index]] = [copy[index]!, copy[index - 1]!];
                      return copy;
                    })
                  }
                >
                  ↑
                </Button>
              ) : null}
              <Button
                className="button danger"
                onPress={() => setRules((list) => list.filter((_, i) => i !== index))}
              >
                {t('removeRule', { n })}
              </Button>
            </div>
          </fieldset>
        );
      })}
      {general ? (
        <p className="error-text" role="alert">
          {general}
        </p>
      ) : null}
      <div className="row-actions">
        <Button
          className="button secondary"
          onPress={() =>
            setRules((list) => [
              ...list,
              {
                key: nextKey++,
                name: '',
                strategy: 'all',
                maxPartners: '1',
                participationIds: setup.participations.map((p) => p.id),
                filter: [],
              },
            ])
          }
        >
          {t('addRule')}
        </Button>
        <Button type="submit" className="button primary" isDisabled={save.isPending}>
          {t('saveRules')}
        </Button>
      </div>
    </form>
  );
}
