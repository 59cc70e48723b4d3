// Settings → Pipelines and automations. Pipelines are part of the entity's definition
// (PUT /api/v1/settings/entities/{key}); this screen adds, orders and removes stages and pipelines
// and sends the definition back with everything else as it was read.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Button, Form } from 'react-aria-components';
import { fieldErrors } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { useSession } from '../../lib/session.tsx';
import { DetailList, ErrorText } from '../../ui/errors.tsx';
import { TextField } from '../../ui/fields.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { useToast } from '../../ui/toast.tsx';
import { SettingsNav } from '../settings/parts.tsx';
import {
  fetchSettingsEntities,
  type PipelineDef,
  putPipelines,
  SETTINGS_ENTITIES_KEY,
  type SettingsEntity,
} from './api.ts';
import { AutomationsSection } from './automations.tsx';
import { messages } from './messages.ts';
import './pipelines.css';

export function PipelinesSettings() {
  const t = useT(messages);
  const session = useSession();
  const allowed = session.can('settings');
  const entities = useQuery({
    queryKey: SETTINGS_ENTITIES_KEY,
    queryFn: ({ signal }) => fetchSettingsEntities(signal),
    enabled: allowed,
  });
  if (!allowed) {
    return (
      <section>
        <PageTitle>{t('title')}</PageTitle>
        <p>{t('notAllowed')}</p>
      </section>
    );
  }
  const list = (entities.data?.entities ?? []).filter((entity) => !entity.archived);
  return (
    <section className="pipelines-page">
      <SettingsNav />
      <PageTitle>{t('title')}</PageTitle>
      <section aria-labelledby="pipelines-heading">
        <h2 id="pipelines-heading">{t('pipelines')}</h2>
        <p className="muted">{t('pipelinesHelp')}</p>
        {entities.isPending ? <Loading /> : null}
        <ErrorText error={entities.error} />
        {entities.data && list.length === 0 ? <p>{t('noEntities')}</p> : null}
        {list.map((entity) => (
          <EntityPipelines key={`${entity.key}:${JSON.stringify(entity.pipelines)}`} entity={entity} />
        ))}
      </section>
      {session.hasModule('crm') ? (
        <AutomationsSection entities={list} />
      ) : (
        <section>
          <h2>{t('automations')}</h2>
          <p>{t('noModule')}</p>
        </section>
      )}
    </section>
  );
}

function EntityPipelines({ entity }: { entity: SettingsEntity }) {
  const t = useT(messages);
  const client = useQueryClient();
  const toast = useToast();
  const [draft, setDraft] = useState<PipelineDef[]>(() => entity.pipelines.map((p) => ({ ...p })));
  const [newStage, setNewStage] = useState<Record<number, string>>({});
  const [stageProblem, setStageProblem] = useState<Record<number, string>>({});
  const [newPipeline, setNewPipeline] = useState({ name: '', stage: '' });
  const [pipelineProblem, setPipelineProblem] = useState<string | null>(null);
  const dirty = JSON.stringify(draft) !== JSON.stringify(entity.pipelines);

  const save = useMutation({
    mutationFn: () => putPipelines(entity, draft),
    onSuccess: async () => {
      toast.show(t('saved', { entity: entity.name }));
      await Promise.all([
        client.invalidateQueries({ queryKey: SETTINGS_ENTITIES_KEY }),
        client.invalidateQueries({ queryKey: ['crm-pipelines'] }),
      ]);
    },
  });
  const errors = fieldErrors(save.error);
  const pipelineErrors = (index: number) =>
    Object.entries(errors)
      .filter(([key]) => key === `pipelines.${index}` || key.startsWith(`pipelines.${index}.`))
      .map(([, message]) => message);
  const otherErrors = Object.entries(errors).filter(([key]) => !/^pipelines\.\d+/.test(key));

  const update = (index: number, change: (pipeline: PipelineDef) => PipelineDef) =>
    setDraft((list) => list.map((pipeline, i) => (i === index ? change(pipeline) : pipeline)));
  const moveStage = (index: number, from: number, to: number) =>
    update(index, (pipeline) => {
      const stages = [...pipeline.stages];
      const [stage] = stages.splice(from, 1);
      if (stage !== undefined) stages.splice(to, 0, stage);
      return { ...pipeline, stages };
    });
  const addStage = (index: number, event: FormEvent) => {
    event.preventDefault();
    const name = (newStage[index] ?? '').trim();
    const pipeline = draft[index];
    if (!pipeline) return;
    if (name === '') return setStageProblem((p) => ({ ...p, [index]: t('nameNeeded') }));
    if (pipeline.stages.includes(name))
      return setStageProblem((p) => ({ ...p, [index]: t('duplicateStage') }));
    update(index, (p) => ({ ...p, stages: [...p.stages, name] }));
    setNewStage((s) => ({ ...s, [index]: '' }));
    setStageProblem((p) => ({ ...p, [index]: '' }));
  };
  const addPipeline = (event: FormEvent) => {
    event.preventDefault();
    const name = newPipeline.name.trim();
    const stage = newPipeline.stage.trim();
    if (name === '' || stage === '') return setPipelineProblem(t('nameNeeded'));
    if (draft.some((p) => p.name === name)) return setPipelineProblem(t('duplicatePipeline'));
    setDraft((list) => [...list, { name, stages: [stage] }]);
    setNewPipeline({ name: '', stage: '' });
    setPipelineProblem(null);
  };

  const headingId = `entity-${entity.key}`;
  return (
    <section className="panel entity-pipelines" aria-labelledby={headingId}>
      <h3 id={headingId}>{t('entityHeading', { name: entity.name, key: entity.key })}</h3>
      {draft.length === 0 ? <p className="muted">{t('noPipeline')}</p> : null}
      {draft.map((pipeline, index) => (
        <div key={pipeline.name} className="pipeline-edit">
          <div className="pipeline-head">
            <h4>{t('pipelineHeading', { name: pipeline.name })}</h4>
            <Button
              className="button danger small"
              aria-label={t('removePipeline', { pipeline: pipeline.name })}
              onPress={() => setDraft((list) => list.filter((_, i) => i !== index))}
            >
              {t('removePipelineShort')}
            </Button>
          </div>
          {pipelineErrors(index).map((message) => (
            <p key={message} className="error-text" role="alert">
              {message}
            </p>
          ))}
          <ol className="stage-list" aria-label={t('stagesOf', { pipeline: pipeline.name })}>
            {pipeline.stages.map((stage, position) => (
              <li key={stage}>
                <span className="stage-name">{stage}</span>
                <span className="stage-tools">
                  <Button
                    className="button secondary small"
                    aria-label={t('moveUp', { stage })}
                    isDisabled={position === 0}
                    onPress={() => moveStage(index, position, position - 1)}
                  >
                    <span aria-hidden="true">↑</span>
                  </Button>
                  <Button
                    className="button secondary small"
                    aria-label={t('moveDown', { stage })}
                    isDisabled={position === pipeline.stages.length - 1}
                    onPress={() => moveStage(index, position, position + 1)}
                  >
                    <span aria-hidden="true">↓</span>
                  </Button>
                  <Button
                    className="button danger small"
                    aria-label={t('removeStage', { stage })}
                    isDisabled={pipeline.stages.length === 1}
                    onPress={() =>
                      update(index, (p) => ({ ...p, stages: p.stages.filter((s) => s !== stage) }))
                    }
                  >
                    <span aria-hidden="true">×</span>
                  </Button>
                </span>
              </li>
            ))}
          </ol>
          <Form className="inline-form" onSubmit={(event) => addStage(index, event)}>
            <TextField
              label={t('newStage', { pipeline: pipeline.name })}
              value={newStage[index] ?? ''}
              onChange={(value) => setNewStage((s) => ({ ...s, [index]: value }))}
              error={stageProblem[index] || null}
            />
            <Button type="submit" className="button secondary">
              {t('addStage')}
            </Button>
          </Form>
        </div>
      ))}
      <Form className="inline-form" onSubmit={addPipeline}>
        <TextField
          label={t('newPipeline')}
          value={newPipeline.name}
          onChange={(name) => setNewPipeline((p) => ({ ...p, name }))}
          error={pipelineProblem}
        />
        <TextField
          label={t('firstStage')}
          value={newPipeline.stage}
          onChange={(stage) => setNewPipeline((p) => ({ ...p, stage }))}
        />
        <Button type="submit" className="button secondary">
          {t('addPipeline')}
        </Button>
      </Form>
      <DetailList details={otherErrors} />
      {save.error && Object.keys(errors).length === 0 ? <ErrorText error={save.error} /> : null}
      <div className="form-actions">
        {dirty ? <span className="muted">{t('unsaved')}</span> : null}
        <Button
          className="button primary"
          isDisabled={!dirty || save.isPending}
          onPress={() => save.mutate()}
          aria-label={`${t('save')}: ${entity.name}`}
        >
          {t('save')}
        </Button>
        <Button
          className="button secondary"
          isDisabled={!dirty || save.isPending}
          onPress={() => {
            setDraft(entity.pipelines.map((p) => ({ ...p })));
            save.reset();
          }}
        >
          {t('discard')}
        </Button>
      </div>
    </section>
  );
}
