import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { accountIdOf, actorOf, callerOf } from '../../http/auth.ts';
import { IdParams, PageQuery, s2Errors } from '../../http/schemas.ts';
import {
  Appointment,
  AppointmentList,
  AppointmentQuery,
  BookBody,
  Booked,
  Calendar,
  CalendarList,
  CancelBody,
  CreateCalendarBody,
  SlotList,
  SlotsQuery,
  UpdateCalendarBody,
} from './booking.schemas.ts';
import type { BookingService } from './booking.service.ts';
import type { BookingVisitorLimit } from './booking.visitors.ts';

const settingsAuth = {
  accept: ['api_key' as const],
  permission: 'settings' as const,
  module: 'booking' as const,
};
const bookingAuth = {
  accept: ['api_key' as const],
  permission: 'booking' as const,
  module: 'booking' as const,
};
const settingsTags = ['Settings: booking'];
const tags = ['Booking'];
const PUBLIC_SURFACE =
  'Public: no API key, the link token is the credential. One client address may make LEADS_BOOKING_RATE_LIMIT_PER_MINUTE requests a minute (120 by default) to the booking page and JSON, across every link; beyond that 429 rate_limited with Retry-After.';

export const bookingRoutes: FastifyPluginAsyncTypebox<{
  booking: BookingService;
  visitors: BookingVisitorLimit;
}> = async (app, { booking, visitors }) => {
  // The public routes take no API key: the client address's limit, before the body is read.
  const admitVisitor = async (request: FastifyRequest) => visitors.admit(request.ip);

  app.post(
    '/api/v1/settings/booking/calendars',
    {
      config: { auth: settingsAuth },
      schema: {
        tags: settingsTags,
        operationId: 'createCalendar',
        summary:
          'Create a calendar: time zone, weekly hours, exceptions, slot length, buffer, notice, horizon, capacity',
        body: CreateCalendarBody,
        response: { 201: Calendar, ...s2Errors },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await booking.createCalendar(accountIdOf(request), request.body)),
  );

  app.get(
    '/api/v1/settings/booking/calendars',
    {
      config: { auth: settingsAuth },
      schema: {
        tags: settingsTags,
        operationId: 'listCalendars',
        summary: 'List calendars, oldest first',
        querystring: PageQuery,
        response: { 200: CalendarList, ...s2Errors },
      },
    },
    async (request) =>
      booking.listCalendars(accountIdOf(request), request.query.limit ?? 100, request.query.cursor),
  );

  app.get(
    '/api/v1/settings/booking/calendars/:id',
    {
      config: { auth: settingsAuth },
      schema: {
        tags: settingsTags,
        operationId: 'getCalendar',
        summary: 'Read a calendar',
        params: IdParams,
        response: { 200: Calendar, ...s2Errors },
      },
    },
    async (request) => booking.getCalendar(accountIdOf(request), request.params.id),
  );

  app.patch(
    '/api/v1/settings/booking/calendars/:id',
    {
      config: { auth: settingsAuth },
      schema: {
        tags: settingsTags,
        operationId: 'updateCalendar',
        summary: 'Change a calendar; booked appointments stay as they are',
        params: IdParams,
        body: UpdateCalendarBody,
        response: { 200: Calendar, ...s2Errors },
      },
    },
    async (request) => booking.updateCalendar(accountIdOf(request), request.params.id, request.body),
  );

  app.delete(
    '/api/v1/settings/booking/calendars/:id',
    {
      config: { auth: settingsAuth },
      schema: {
        tags: settingsTags,
        operationId: 'deleteCalendar',
        summary:
          'Delete a calendar and its booking links; refused (409 conflict) while it has booked appointments ahead',
        params: IdParams,
        response: { 204: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      await booking.deleteCalendar(accountIdOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/api/v1/booking/slots',
    {
      onRequest: admitVisitor,
      schema: {
        tags,
        operationId: 'listBookingSlots',
        summary: 'Free slots of a booking link’s calendar (public: the token is the credential)',
        description: PUBLIC_SURFACE,
        security: [],
        querystring: SlotsQuery,
        response: { 200: SlotList, ...s2Errors },
      },
    },
    async (request) => booking.publicSlots(request.query.token, request.query.from, request.query.to),
  );

  app.post(
    '/api/v1/booking/book',
    {
      onRequest: admitVisitor,
      schema: {
        tags,
        operationId: 'bookSlot',
        summary: 'Book a slot with a booking link (public: the token is the credential); a link books once',
        description: PUBLIC_SURFACE,
        security: [],
        body: BookBody,
        response: { 201: Booked, ...s2Errors },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await booking.publicBook(request.body.token, request.body.starts_at, request.id)),
  );

  app.get(
    '/api/v1/booking/appointments',
    {
      config: { auth: bookingAuth },
      schema: {
        tags,
        operationId: 'listAppointments',
        summary: 'Appointments by start time, with filters',
        querystring: AppointmentQuery,
        response: { 200: AppointmentList, ...s2Errors },
      },
    },
    async (request) => booking.listAppointments(accountIdOf(request), request.query),
  );

  app.get(
    '/api/v1/booking/appointments/:id',
    {
      config: { auth: bookingAuth },
      schema: {
        tags,
        operationId: 'getAppointment',
        summary: 'Read an appointment',
        params: IdParams,
        response: { 200: Appointment, ...s2Errors },
      },
    },
    async (request) => booking.getAppointment(accountIdOf(request), request.params.id),
  );

  app.post(
    '/api/v1/booking/appointments/:id/cancel',
    {
      // `reason` is optional: a cancellation may send no body at all.
      config: { auth: bookingAuth, bodyOptional: true },
      schema: {
        tags,
        operationId: 'cancelAppointment',
        summary:
          'Cancel an appointment: its seat is free again, the person gets a cancelling invitation; a cancelled one answers as it is',
        params: IdParams,
        body: CancelBody,
        response: { 200: Appointment, ...s2Errors },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      return booking.cancelAppointment(caller.account.id, request.params.id, request.body.reason ?? null, {
        actor: actorOf(caller),
        requestId: request.id,
      });
    },
  );
};
