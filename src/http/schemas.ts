import { Type } from 'typebox';
import { ERROR_CODES } from './errors.ts';

/** Shared pieces of route schemas. */

export const Uuid = Type.String({ format: 'uuid' });
export const Timestamp = Type.String({ format: 'date-time' });
export const IdParams = Type.Object({ id: Uuid });

/** S2 and operator error body: `{"error": code}`, plus members some codes carry. */
export const S2Error = Type.Object(
  {
    error: Type.String({ enum: ERROR_CODES }),
    details: Type.Optional(
      Type.Array(Type.Object({ key: Type.String(), reason: Type.String(), message: Type.String() })),
    ),
  },
  { additionalProperties: true, $id: 'S2Error' },
);

/** S1 error body (interface: S1 error body). */
export const S1Error = Type.Object(
  {
    status: Type.Literal('error'),
    message: Type.String(),
    errors: Type.Optional(Type.Record(Type.String(), Type.Array(Type.String()))),
  },
  { $id: 'S1Error' },
);

export const s2Errors = { '4xx': Type.Ref('S2Error'), '5xx': Type.Ref('S2Error') };
export const s1Errors = { '4xx': Type.Ref('S1Error'), '5xx': Type.Ref('S1Error') };

export const Warning = Type.Object({
  key: Type.String(),
  reason: Type.String(),
  message: Type.Optional(Type.String()),
});

/** Cursor pagination of every list endpoint but deliveries (decisions §6). */
export const PageQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
  cursor: Type.Optional(Type.String({ maxLength: 200 })),
});

export const NextCursor = Type.Union([Type.String(), Type.Null()]);

export function iso(value: Date | string): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}
