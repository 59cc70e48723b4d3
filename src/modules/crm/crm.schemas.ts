import { Type } from 'typebox';
import { Timestamp, Uuid } from '../../http/schemas.ts';

const StageName = Type.String({
  minLength: 1,
  maxLength: 100,
  description: 'a stage name (or its id) of the pipeline; another value answers 422',
});
const PipelineName = Type.String({
  minLength: 1,
  maxLength: 100,
  description: 'a pipeline name (or its id)',
});

export const StageMoveBody = Type.Object(
  {
    stage: StageName,
    pipeline: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description:
          'a pipeline name (or its id); required when the entity has several (422 pipeline_required)',
      }),
    ),
  },
  { additionalProperties: false },
);

export const StageMoveResponse = Type.Object({
  id: Uuid,
  crm: Type.Object({ pipeline: Type.String(), stage: Type.String(), entered_at: Timestamp }),
  previous: Type.Union([Type.String(), Type.Null()], {
    description:
      'the stage the record left; equal to `stage` when it was already there; null when it had none',
  }),
});

export const S1StatusBody = Type.Object(
  {
    status_step: StageName,
    pipeline: Type.Optional(PipelineName),
  },
  { additionalProperties: false },
);

export const S1StatusResponse = Type.Object({
  status: Type.Literal('success'),
  lead_id: Uuid,
  new_status: Type.String(),
});
