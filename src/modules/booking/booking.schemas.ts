import { Type } from 'typebox';
import { Cursor, Name, NextCursor, QueryDateOrTimestamp, Timestamp, Uuid } from '../../http/schemas.ts';
import { WEEKDAYS } from './booking.rules.ts';

const HourMinute = Type.String({ pattern: '^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$' });
const Window = Type.Array(HourMinute, {
  minItems: 2,
  maxItems: 2,
  description:
    'An opening window ["HH:MM", "HH:MM"] in the calendar’s wall-clock time; the start is before the end ("24:00" ends the day)',
});
const Hours = Type.Array(Window, {
  maxItems: 12,
  description: 'Opening windows of a day; they may not overlap',
});

const Weekly = Type.Object(Object.fromEntries(WEEKDAYS.map((day) => [day, Type.Optional(Hours)])), {
  additionalProperties: false,
  description: 'Opening hours per weekday (mon … sun); a day left out is closed',
});

const Exceptions = Type.Array(
  Type.Object(
    {
      date: Type.String({
        pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$',
        description: 'A calendar date YYYY-MM-DD, listed once',
      }),
      hours: Hours,
    },
    { additionalProperties: false },
  ),
  { maxItems: 366, description: 'Dates whose hours replace the weekday’s; `hours: []` closes the date' },
);

const calendarProperties = {
  name: Name(200),
  time_zone: Type.String({
    minLength: 1,
    maxLength: 64,
    description:
      'An IANA time zone name (e.g. Europe/Berlin, UTC, Etc/GMT-1), stored as the time zone database spells it (europe/berlin becomes Europe/Berlin; an alias stays as written); another value, a bare offset such as +01:00 too, answers 422 invalid_time_zone',
  }),
  slot_minutes: Type.Integer({ minimum: 5, maximum: 1440, description: 'Length of a slot (default 30)' }),
  buffer_minutes: Type.Integer({ minimum: 0, maximum: 1440, description: 'Gap after each slot (default 0)' }),
  min_notice_minutes: Type.Integer({
    minimum: 0,
    maximum: 525_600,
    description: 'How long before its start a slot can still be booked (default 60)',
  }),
  horizon_days: Type.Integer({
    minimum: 1,
    maximum: 365,
    description: 'How far ahead slots are offered (default 30)',
  }),
  capacity: Type.Integer({ minimum: 1, maximum: 100, description: 'Bookings one slot takes (default 1)' }),
  weekly: Weekly,
  exceptions: Exceptions,
  default: Type.Boolean({
    description:
      'Make this the account’s default calendar (intake uses it without calendar_id); the first calendar is the default, and false cannot be set on the default (make another the default)',
  }),
};

export const CreateCalendarBody = Type.Object(
  {
    name: calendarProperties.name,
    time_zone: calendarProperties.time_zone,
    slot_minutes: Type.Optional(calendarProperties.slot_minutes),
    buffer_minutes: Type.Optional(calendarProperties.buffer_minutes),
    min_notice_minutes: Type.Optional(calendarProperties.min_notice_minutes),
    horizon_days: Type.Optional(calendarProperties.horizon_days),
    capacity: Type.Optional(calendarProperties.capacity),
    weekly: calendarProperties.weekly,
    exceptions: Type.Optional(calendarProperties.exceptions),
    default: Type.Optional(calendarProperties.default),
  },
  { additionalProperties: false, description: 'At most 50 calendars per account' },
);

export const UpdateCalendarBody = Type.Object(
  Object.fromEntries(Object.entries(calendarProperties).map(([key, schema]) => [key, Type.Optional(schema)])),
  { additionalProperties: false, description: 'A key left out stays as it is' },
);

export const Calendar = Type.Object({
  id: Uuid,
  name: Type.String(),
  time_zone: Type.String(),
  slot_minutes: Type.Integer(),
  buffer_minutes: Type.Integer(),
  min_notice_minutes: Type.Integer(),
  horizon_days: Type.Integer(),
  capacity: Type.Integer(),
  weekly: Type.Object(
    Object.fromEntries(WEEKDAYS.map((day) => [day, Type.Array(Type.Array(Type.String()))])),
  ),
  exceptions: Type.Array(Type.Object({ date: Type.String(), hours: Type.Array(Type.Array(Type.String())) })),
  default: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const CalendarList = Type.Object({ calendars: Type.Array(Calendar), next_cursor: NextCursor });

const BookingToken = Type.String({
  minLength: 4,
  maxLength: 100,
  description:
    'The token of a booking link (`bk_…`); an unknown one answers 404, a used one 409 already_booked, an expired one 410 token_expired',
});

const SlotTime = Type.String({
  maxLength: 64,
  description:
    'A date YYYY-MM-DD (midnight UTC) or an ISO 8601 time with an offset; at most 31 days between from and to',
});

export const SlotsQuery = Type.Object(
  {
    token: BookingToken,
    from: Type.Optional(SlotTime),
    to: Type.Optional(SlotTime),
  },
  { additionalProperties: false },
);

export const SlotList = Type.Object({
  time_zone: Type.String({ description: 'The calendar’s time zone' }),
  duration_minutes: Type.Integer({
    description:
      'How long an appointment booked now lasts: the length the link was made with, at most the calendar’s slot length as it is now, or that slot length when none was asked',
  }),
  slots: Type.Array(Type.Object({ starts_at: Timestamp, ends_at: Timestamp })),
});

export const BookBody = Type.Object(
  {
    token: BookingToken,
    starts_at: Type.String({
      minLength: 1,
      maxLength: 64,
      description:
        'The start of a free slot as listed, an ISO 8601 time with an offset (422 otherwise); a taken or not offered slot answers 409 slot_taken',
    }),
  },
  { additionalProperties: false },
);

export const Booked = Type.Object({ appointment_id: Uuid, starts_at: Timestamp, ends_at: Timestamp });

export const Appointment = Type.Object({
  id: Uuid,
  calendar_id: Uuid,
  record_id: Uuid,
  title: Type.String(),
  starts_at: Timestamp,
  ends_at: Timestamp,
  status: Type.String({ enum: ['booked', 'cancelled'] }),
  created_at: Timestamp,
});

export const AppointmentQuery = Type.Object(
  {
    from: Type.Optional(
      QueryDateOrTimestamp(
        'Appointments starting at or after; a date (YYYY-MM-DD) is its midnight UTC, as for slots',
      ),
    ),
    to: Type.Optional(
      QueryDateOrTimestamp(
        'Appointments starting before; a date (YYYY-MM-DD) is its midnight UTC, as for slots; before from: 422 invalid_range',
      ),
    ),
    calendar_id: Type.Optional(Uuid),
    record_id: Type.Optional(Uuid),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

export const AppointmentList = Type.Object({
  appointments: Type.Array(Appointment),
  next_cursor: NextCursor,
});

export const CancelBody = Type.Object(
  { reason: Type.Optional(Type.String({ maxLength: 1000 })) },
  { additionalProperties: false },
);
