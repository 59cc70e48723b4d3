import { Type } from 'typebox';
import { NextCursor, Timestamp, Uuid } from '../../http/schemas.ts';
import { WEBHOOK_EVENTS } from '../../outbound/outbound.service.ts';

/** Account webhooks per account: enough for every integration, bounded like every input. */
export const MAX_WEBHOOKS = 50;

const WebhookUrl = Type.String({
  minLength: 1,
  maxLength: 2000,
  description: `An absolute http or https URL without credentials, as written: \`http://\` or \`https://\` and the host, no blanks or backslashes (nothing is trimmed); at most ${MAX_WEBHOOKS} webhooks per account`,
});
/** Event names are checked by the service, so that an unknown one is named in the 422. */
const EventNames = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
  minItems: 1,
  maxItems: 20,
  uniqueItems: true,
  description: `Event names: ${WEBHOOK_EVENTS.join(', ')}; or \`*\` alone for every event. A name given twice, or \`*\` beside names, answers 422`,
});
const Description = Type.String({ maxLength: 500 });

export const Webhook = Type.Object({
  id: Uuid,
  url: Type.String(),
  events: Type.Array(Type.String()),
  description: Type.Union([Type.String(), Type.Null()]),
  enabled: Type.Boolean(),
  disabled_reason: Type.Union([
    Type.String({
      description:
        '`gone` (the receiver answered 410), `failing` (every message failed too long) or `by_user`',
    }),
    Type.Null(),
  ]),
  failing_since: Type.Union([Timestamp, Type.Null()]),
  previous_secret_until: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const WebhookWithSecret = Type.Object({
  ...Webhook.properties,
  secret: Type.String({ description: '`whsec_…`; shown only in this answer' }),
});

export const CreateWebhookBody = Type.Object(
  { url: WebhookUrl, events: EventNames, description: Type.Optional(Description) },
  { additionalProperties: false },
);

export const UpdateWebhookBody = Type.Object(
  {
    url: Type.Optional(WebhookUrl),
    events: Type.Optional(EventNames),
    description: Type.Optional(Type.Union([Type.Null(), Description])),
    enabled: Type.Optional(Type.Boolean()),
    rotate_secret: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

/** A PATCH answers the new secret only when it rotated it. */
export const UpdatedWebhook = Type.Object({
  ...Webhook.properties,
  secret: Type.Optional(Type.String({ description: 'The new secret, when `rotate_secret` was asked' })),
});

export const WebhookList = Type.Object({ webhooks: Type.Array(Webhook), next_cursor: NextCursor });

/** Failed messages requeued by one recovery call; a larger backlog takes further calls. */
export const MAX_RECOVERED = 1_000;

export const RecoverWebhookBody = Type.Object(
  {
    since: Type.String({
      format: 'date-time',
      maxLength: 64,
      description:
        'Requeue the messages that failed among those written from this time (ISO 8601 with an offset); messages are kept 30 days',
    }),
    until: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: 64,
        description: 'Up to this time, not included (default: now)',
      }),
    ),
  },
  { additionalProperties: false },
);

export const RecoveredWebhook = Type.Object({
  requeued: Type.Integer({
    minimum: 0,
    description: `Failed messages queued for one more attempt each, oldest first (at most ${MAX_RECOVERED} a call)`,
  }),
  more: Type.Boolean({
    description: 'Whether more failed messages of the window wait: call again for the next ones',
  }),
});

export const WebhookTestResult = Type.Object({
  message_id: Uuid,
  delivered: Type.Boolean(),
  status_code: Type.Union([Type.Integer(), Type.Null()]),
  body: Type.Union([Type.String({ description: 'The first 1 KiB of the answer' }), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  duration_ms: Type.Integer(),
});
