// Automations (decisions §7): one action for every move into a stage. Listed, created, edited and
// deleted through /api/v1/settings/automations; the service checks everything and its 422 details
// are shown next to the fields they name.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Button, Checkbox, CheckboxGroup, Form, Label } from 'react-aria-components';
import { fieldErrors } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { useSession } from '../../lib/session.tsx';
import { MessageAttempts } from '../../ui/attempts.tsx';
import { ErrorText } from '../../ui/errors.tsx';
import { SelectField, TextField } from '../../ui/fields.tsx';
import { Loading } from '../../ui/pages.tsx';
import { useToast } from '../../ui/toast.tsx';
import {
  ACTION_TYPES,
  type ActionType,
  AUTOMATIONS_KEY,
  type Automation,
  type AutomationAction,
  type AutomationInput,
  createAutomation,
  deleteAutomation,
  fetchAllAutomations,
  type SettingsEntity,
  updateAutomation,
} from './api.ts';
import { messages } from './messages.ts';

/** Which members each action type takes (decisions §7); the others are not sent. */
const MEMBERS: Record<ActionType, readonly (keyof AutomationAction)[]> = {
  webhook: ['url'],
  email: ['to', 'subject', 'body', 'record_token_fields', 'record_token_days'],
  note: ['body'],
  distribute: [],
  move_stage: ['pipeline', 'stage'],
};

export function AutomationsSection({ entities }: { entities: SettingsEntity[] }) {
  const t = useT(messages);
  const list = useQuery({ queryKey: AUTOMATIONS_KEY, queryFn: ({ signal }) => fetchAllAutomations(signal) });
  const [editing, setEditing] = useState<Automation | 'new' | null>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const withPipelines = entities.filter((entity) => entity.pipelines.length > 0);
  const names = new Map(entities.map((e) => [e.key, e.name]));

  return (
    <section aria-labelledby="automations-heading">
      <div className="section-head">
        <h2 id="automations-heading">{t('automations')}</h2>
        <Button
          className="button primary"
          isDisabled={withPipelines.length === 0 || editing === 'new'}
          onPress={() => {
            setSecret(null);
            setEditing('new');
          }}
        >
          {t('newAutomation')}
        </Button>
      </div>
      <p className="muted">{t('automationsHelp')}</p>
      {secret ? (
        <div className="panel notice-panel" role="status">
          <h3>{t('secretTitle')}</h3>
          <p className="secret">{t('secretText', { secret })}</p>
        </div>
      ) : null}
      {editing !== null ? (
        <AutomationForm
          key={editing === 'new' ? 'new' : editing.id}
          automation={editing === 'new' ? null : editing}
          entities={withPipelines}
          onDone={(saved) => {
            setEditing(null);
            if (saved?.secret) setSecret(saved.secret);
          }}
        />
      ) : null}
      {list.isPending ? <Loading /> : null}
      <ErrorText error={list.error} />
      {list.data && list.data.length === 0 ? <p>{t('noAutomations')}</p> : null}
      {list.data && list.data.length > 0 ? (
        <ul className="plain-list automation-list">
          {list.data.map((automation) => (
            <AutomationItem
              key={automation.id}
              automation={automation}
              entityName={names.get(automation.entity) ?? automation.entity}
              onEdit={() => {
                setSecret(null);
                setEditing(automation);
              }}
            />
          ))}
        </ul>
      ) : null}
    </section>
  );
}

function summary(t: ReturnType<typeof useT<typeof messages.en>>, action: AutomationAction): string {
  switch (action.type) {
    case 'webhook':
      return t('summaryWebhook', { url: action.url ?? '' });
    case 'email':
      return t('summaryEmail', { to: action.to ?? '', subject: action.subject ?? '' });
    case 'note':
      return t('summaryNote', { body: action.body ?? '' });
    case 'distribute':
      return t('summaryDistribute');
    case 'move_stage':
      return t('summaryMove', {
        stage: action.pipeline ? `${action.stage} (${action.pipeline})` : (action.stage ?? ''),
      });
    default:
      return String((action as { type: unknown }).type);
  }
}

function AutomationItem({
  automation,
  entityName,
  onEdit,
}: {
  automation: Automation;
  entityName: string;
  onEdit(): void;
}) {
  const t = useT(messages);
  const client = useQueryClient();
  const toast = useToast();
  const [confirming, setConfirming] = useState(false);
  const [showingAttempts, setShowingAttempts] = useState(false);
  // Webhook and email actions send messages; their attempts (retries included) are listed.
  const sends = automation.action.type === 'webhook' || automation.action.type === 'email';
  const remove = useMutation({
    mutationFn: () => deleteAutomation(automation.id),
    onSuccess: async () => {
      toast.show(t('deleted', { name: automation.name }));
      await client.invalidateQueries({ queryKey: AUTOMATIONS_KEY });
    },
  });
  return (
    <li className="automation-item">
      <div className="automation-text">
        <strong>{automation.name}</strong>{' '}
        <span className={automation.enabled ? 'badge on' : 'badge off'}>
          {automation.enabled ? t('enabled') : t('disabled')}
        </span>
        <div className="muted">
          {t('when', { entity: entityName, stage: automation.stage, pipeline: automation.pipeline })}
        </div>
        <div className="automation-action">{summary(t, automation.action)}</div>
        <ErrorText error={remove.error} />
      </div>
      <div className="automation-tools">
        {confirming ? (
          <>
            <span role="alert">{t('confirmDelete', { name: automation.name })}</span>
            <Button className="button danger" isDisabled={remove.isPending} onPress={() => remove.mutate()}>
              {t('confirm')}
            </Button>
            <Button className="button secondary" onPress={() => setConfirming(false)}>
              {t('cancel')}
            </Button>
          </>
        ) : (
          <>
            {sends ? (
              <Button
                className="button secondary"
                aria-label={t('attemptsNamed', { name: automation.name })}
                aria-expanded={showingAttempts}
                onPress={() => setShowingAttempts((shown) => !shown)}
              >
                {t('attempts')}
              </Button>
            ) : null}
            <Button
              className="button secondary"
              aria-label={t('editNamed', { name: automation.name })}
              onPress={onEdit}
            >
              {t('edit')}
            </Button>
            <Button
              className="button danger"
              aria-label={t('deleteNamed', { name: automation.name })}
              onPress={() => setConfirming(true)}
            >
              {t('delete')}
            </Button>
          </>
        )}
      </div>
      {showingAttempts ? (
        <div className="automation-attempts">
          <MessageAttempts
            url={`/api/v1/settings/automations/${automation.id}/attempts`}
            queryKey={[...AUTOMATIONS_KEY, automation.id, 'attempts']}
            headingId={`attempts-${automation.id}`}
            headingLevel={3}
          />
        </div>
      ) : null}
    </li>
  );
}

interface FormState {
  name: string;
  entity: string;
  pipeline: string;
  stage: string;
  enabled: boolean;
  type: ActionType;
  url: string;
  to: string;
  subject: string;
  body: string;
  tokenFields: string[];
  tokenDays: string;
  movePipeline: string;
  moveStage: string;
}

function initialState(automation: Automation | null, entities: SettingsEntity[]): FormState {
  const action = automation?.action;
  const entity = entities.find((e) => e.key === automation?.entity) ?? entities[0];
  const pipeline = automation?.pipeline ?? entity?.pipelines[0]?.name ?? '';
  return {
    name: automation?.name ?? '',
    entity: entity?.key ?? '',
    pipeline,
    stage: automation?.stage ?? entity?.pipelines[0]?.stages[0] ?? '',
    enabled: automation?.enabled ?? true,
    type: action?.type ?? 'note',
    url: action?.url ?? '',
    to: action?.to ?? '',
    subject: action?.subject ?? '',
    body: action?.body ?? '',
    tokenFields: action?.record_token_fields ?? [],
    tokenDays: action?.record_token_days ? String(action.record_token_days) : '',
    movePipeline: action?.pipeline ?? pipeline,
    moveStage: action?.type === 'move_stage' ? (action.stage ?? '') : '',
  };
}

/** The request body: only the members the chosen action type takes; empty optional ones left out. */
function toInput(state: FormState, entity: SettingsEntity | undefined): AutomationInput {
  const several = (entity?.pipelines.length ?? 0) > 1;
  const all: AutomationAction = {
    type: state.type,
    url: state.url.trim() || undefined,
    to: state.to.trim() || undefined,
    subject: state.subject || undefined,
    body: state.body || undefined,
    record_token_fields: state.tokenFields.length > 0 ? state.tokenFields : undefined,
    record_token_days: state.tokenDays.trim() === '' ? undefined : Number(state.tokenDays),
    pipeline: several ? state.movePipeline || undefined : undefined,
    stage: state.moveStage || undefined,
  };
  const action: AutomationAction = { type: state.type };
  for (const member of MEMBERS[state.type]) {
    if (all[member] !== undefined) (action as unknown as Record<string, unknown>)[member] = all[member];
  }
  return {
    name: state.name,
    entity: state.entity,
    ...(several || state.pipeline ? { pipeline: state.pipeline } : {}),
    stage: state.stage,
    action,
    enabled: state.enabled,
  };
}

function AutomationForm({
  automation,
  entities,
  onDone,
}: {
  automation: Automation | null;
  entities: SettingsEntity[];
  onDone(saved: Automation | null): void;
}) {
  const t = useT(messages);
  const session = useSession();
  const client = useQueryClient();
  const toast = useToast();
  const [state, setState] = useState<FormState>(() => initialState(automation, entities));
  const set = <K extends keyof FormState>(key: K, value: FormState[K]) =>
    setState((s) => ({ ...s, [key]: value }));
  const entity = entities.find((e) => e.key === state.entity);
  const pipeline = entity?.pipelines.find((p) => p.name === state.pipeline) ?? entity?.pipelines[0];
  const movePipeline = entity?.pipelines.find((p) => p.name === state.movePipeline) ?? entity?.pipelines[0];
  const several = (entity?.pipelines.length ?? 0) > 1;

  const save = useMutation({
    mutationFn: (input: AutomationInput) =>
      automation ? updateAutomation(automation.id, input) : createAutomation(input),
    onSuccess: async (saved) => {
      toast.show(t(automation ? 'updated' : 'created', { name: saved.name }));
      await client.invalidateQueries({ queryKey: AUTOMATIONS_KEY });
      onDone(saved);
    },
  });
  const errors = fieldErrors(save.error);
  const err = (key: string) => errors[key] ?? null;
  const shown = new Set([
    'name',
    'entity',
    'pipeline',
    'stage',
    'enabled',
    'action',
    'action.type',
    ...MEMBERS[state.type].map((member) => `action.${member}`),
  ]);
  const unshown = Object.entries(errors).filter(([key]) => !shown.has(key));

  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate(toInput(state, entity));
  };

  const types = ACTION_TYPES.filter(
    (type) =>
      type !== 'distribute' || session.hasModule('distribution') || automation?.action.type === 'distribute',
  );
  const headingId = 'automation-form-heading';
  const fields = entity?.fields ?? [];

  return (
    <section className="panel" aria-labelledby={headingId}>
      <h3 id={headingId}>{automation ? t('formEdit', { name: automation.name }) : t('formNew')}</h3>
      <Form className="form" onSubmit={submit} validationBehavior="aria">
        <div className="grid-2">
          <TextField
            label={t('name')}
            value={state.name}
            onChange={(v) => set('name', v)}
            error={err('name')}
            isRequired
          />
          <SelectField
            label={t('entity')}
            value={state.entity}
            options={entities.map((e) => ({ id: e.key, label: `${e.name} (${e.key})` }))}
            onChange={(key) => {
              const next = entities.find((e) => e.key === key);
              setState((s) => ({
                ...s,
                entity: key,
                pipeline: next?.pipelines[0]?.name ?? '',
                stage: next?.pipelines[0]?.stages[0] ?? '',
                movePipeline: next?.pipelines[0]?.name ?? '',
                moveStage: '',
                tokenFields: [],
              }));
            }}
            error={err('entity')}
          />
          {several ? (
            <SelectField
              label={t('pipeline')}
              value={pipeline?.name ?? null}
              options={(entity?.pipelines ?? []).map((p) => ({ id: p.name, label: p.name }))}
              onChange={(name) => {
                const next = entity?.pipelines.find((p) => p.name === name);
                setState((s) => ({ ...s, pipeline: name, stage: next?.stages[0] ?? '' }));
              }}
              error={err('pipeline')}
            />
          ) : null}
          <SelectField
            label={t('stage')}
            value={state.stage || null}
            options={(pipeline?.stages ?? []).map((s) => ({ id: s, label: s }))}
            onChange={(v) => set('stage', v)}
            error={err('stage')}
          />
          <SelectField
            label={t('actionType')}
            value={state.type}
            options={types.map((type) => ({ id: type, label: t(`type.${type}`) }))}
            onChange={(v) => set('type', v as ActionType)}
            error={err('action.type') ?? err('action')}
          />
        </div>
        {state.type === 'webhook' ? (
          <TextField
            label={t('url')}
            type="url"
            value={state.url}
            onChange={(v) => set('url', v)}
            error={err('action.url')}
            isRequired
          />
        ) : null}
        {state.type === 'email' ? (
          <>
            <TextField
              label={t('to')}
              description={t('toHelp')}
              value={state.to}
              onChange={(v) => set('to', v)}
              error={err('action.to')}
              isRequired
            />
            <TextField
              label={t('subject')}
              value={state.subject}
              onChange={(v) => set('subject', v)}
              error={err('action.subject')}
              isRequired
            />
          </>
        ) : null}
        {state.type === 'email' || state.type === 'note' ? (
          <TextField
            label={t('body')}
            description={t('bodyHelp')}
            multiline
            value={state.body}
            onChange={(v) => set('body', v)}
            error={err('action.body')}
            isRequired
          />
        ) : null}
        {state.type === 'email' ? (
          <>
            <CheckboxGroup
              className="checkbox-group token-fields"
              value={state.tokenFields}
              onChange={(v) => set('tokenFields', v)}
              isInvalid={Boolean(err('action.record_token_fields'))}
            >
              <Label>{t('tokenFields')}</Label>
              {fields
                .filter((f) => f.type !== 'file' && f.type !== 'files')
                .map((field) => (
                  <Checkbox key={field.key} value={field.key} className="checkbox">
                    <span className="checkbox-box" aria-hidden="true" />
                    {field.label} ({field.key})
                  </Checkbox>
                ))}
              {err('action.record_token_fields') ? (
                <p className="error-text">{err('action.record_token_fields')}</p>
              ) : null}
            </CheckboxGroup>
            <TextField
              label={t('tokenDays')}
              type="number"
              inputMode="numeric"
              value={state.tokenDays}
              onChange={(v) => set('tokenDays', v)}
              error={err('action.record_token_days')}
            />
          </>
        ) : null}
        {state.type === 'move_stage' ? (
          <div className="grid-2">
            {several ? (
              <SelectField
                label={t('movePipeline')}
                value={movePipeline?.name ?? null}
                options={(entity?.pipelines ?? []).map((p) => ({ id: p.name, label: p.name }))}
                onChange={(name) => setState((s) => ({ ...s, movePipeline: name, moveStage: '' }))}
                error={err('action.pipeline')}
              />
            ) : null}
            <SelectField
              label={t('moveStage')}
              value={state.moveStage || null}
              options={(movePipeline?.stages ?? []).map((s) => ({ id: s, label: s }))}
              onChange={(v) => set('moveStage', v)}
              error={err('action.stage')}
              isRequired
            />
          </div>
        ) : null}
        <Checkbox className="checkbox" isSelected={state.enabled} onChange={(v) => set('enabled', v)}>
          <span className="checkbox-box" aria-hidden="true" />
          {t('enabledField')}
        </Checkbox>
        {save.error && Object.keys(errors).length > 0 ? (
          <p className="error-text" role="alert">
            {t('failed')}
          </p>
        ) : null}
        {unshown.map(([key, message]) => (
          <p key={key} className="error-text">
            {key}: {message}
          </p>
        ))}
        {save.error && Object.keys(errors).length === 0 ? <ErrorText error={save.error} /> : null}
        <div className="form-actions">
          <Button type="submit" className="button primary" isDisabled={save.isPending}>
            {automation ? t('submitSave') : t('submitCreate')}
          </Button>
          <Button className="button secondary" onPress={() => onDone(null)}>
            {t('cancel')}
          </Button>
        </div>
      </Form>
    </section>
  );
}
