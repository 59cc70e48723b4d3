import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Negotiator from 'negotiator';
import { AppError } from '../../http/errors.ts';
import { type BookingService, linkMinutes } from './booking.service.ts';
import type { BookingVisitorLimit } from './booking.visitors.ts';

/**
 * The page's rendering (with Luxon) is loaded with the first page asked for, not with the
 * service; a service whose accounts never book never loads it.
 */
let pageLoading: Promise<typeof import('./booking.page.ts')> | undefined;
function pageModule() {
  pageLoading ??= import('./booking.page.ts');
  return pageLoading;
}

const ASSETS = path.join(import.meta.dirname, 'public');
const ASSET_HEADERS = { 'cache-control': 'public, max-age=3600', 'x-content-type-options': 'nosniff' };

type Query = Record<string, unknown>;

/** The public booking page: GET shows the slots, POST books one, then the confirmation (POST-redirect-GET). */
export const bookingPageRoutes: FastifyPluginAsyncTypebox<{
  booking: BookingService;
  visitors: BookingVisitorLimit;
}> = async (app, { booking, visitors }) => {
  const script = readFileSync(path.join(ASSETS, 'booking.js'), 'utf8');
  const style = readFileSync(path.join(ASSETS, 'booking.css'), 'utf8');

  async function send(reply: FastifyReply, status: number, html: string) {
    const { PAGE_HEADERS } = await pageModule();
    return reply.code(status).headers(PAGE_HEADERS).send(html);
  }

  /** The page of a link that cannot book (unknown, expired, used), or of an error of ours. */
  async function refusal(reply: FastifyReply, error: unknown, token: string, query: Query) {
    const { messagePage } = await pageModule();
    if (error instanceof AppError) {
      if (error.code === 'not_found')
        return send(
          reply,
          404,
          messagePage(
            'Booking link not found',
            'This booking link does not exist. Check the address, or ask for a new link.',
          ),
        );
      if (error.code === 'token_expired')
        return send(
          reply,
          410,
          messagePage(
            'This booking link has expired',
            'Booking links are valid for a limited time. Ask for a new link.',
          ),
        );
      if (error.code === 'already_booked') return confirmed(reply, token, query, 409);
      if (error.code === 'module_not_enabled') {
        const { PAGE_LANGUAGES, unavailablePage } = await pageModule();
        const language =
          new Negotiator(reply.request.raw).languages(PAGE_LANGUAGES)[0] === 'de' ? 'de' : 'en';
        reply.headers({ 'content-language': language, vary: 'Accept-Language' });
        return send(reply, 403, unavailablePage(language));
      }
      if (error.code === 'rate_limited') {
        if (error.headers) reply.headers(error.headers);
        const seconds = Number(error.headers?.['retry-after'] ?? 1);
        const wait = seconds === 1 ? 'a second' : `${seconds} seconds`;
        return send(
          reply,
          429,
          messagePage(
            'Too many requests',
            `This address has asked for booking pages too often. Please try again in ${wait}.`,
          ),
        );
      }
    }
    reply.log.error({ err: error }, 'booking page failed');
    return send(
      reply,
      500,
      messagePage('Something went wrong', 'The booking could not be shown. Please try again in a moment.'),
    );
  }

  async function slots(
    reply: FastifyReply,
    token: string,
    query: Query,
    status = 200,
    alert: string | null = null,
  ) {
    const view = await booking.linkView(token);
    if (view.state === 'expired') throw new AppError('token_expired');
    if (view.state === 'used') throw new AppError('already_booked');
    const { link, calendar } = view;
    const { visitorZone, weekStart, slotPage, startOfToday } = await pageModule();
    const { zone, chosen } = visitorZone(query.tz, calendar.time_zone);
    const now = booking.now();
    const week = weekStart(query.week, zone, now);
    const from = week.toJSDate();
    const to = week.plus({ days: 7 }).toJSDate();
    const horizonEnd = now.getTime() + calendar.horizon_days * 86_400_000;
    const free = await booking.slotsOfLink(link, calendar, from, to);
    return send(
      reply,
      status,
      slotPage({
        token,
        title: link.title,
        calendarName: calendar.name,
        calendarZone: calendar.time_zone,
        durationMinutes: linkMinutes(link, calendar),
        zone,
        zoneChosen: chosen,
        week,
        canGoBack: week > startOfToday(zone, now),
        canGoForward: to.getTime() < horizonEnd,
        slots: free,
        alert,
      }),
    );
  }

  /** The confirmation of a used link (200 after this visitor's booking, 409 when the link is opened again). */
  async function confirmed(reply: FastifyReply, token: string, query: Query, status: number) {
    const view = await booking.linkView(token);
    if (view.state !== 'used' || !view.appointment)
      return reply.redirect(`/book/${encodeURIComponent(token)}`, 303);
    const { visitorZone, confirmationPage } = await pageModule();
    const { zone } = visitorZone(query.tz, view.calendar.time_zone);
    return send(
      reply,
      status,
      confirmationPage({
        title: view.appointment.title,
        calendarName: view.calendar.name,
        startsAt: view.appointment.starts_at,
        endsAt: view.appointment.ends_at,
        zone,
        cancelled: view.appointment.status === 'cancelled',
      }),
    );
  }

  /**
   * The client address's limit, as on the booking JSON: counted before the token (or a posted
   * form) is read; over it, the visitor gets a page.
   */
  async function admitVisitor(request: FastifyRequest<{ Params: { token: string } }>, reply: FastifyReply) {
    try {
      await visitors.admit(request.ip);
    } catch (error) {
      await refusal(reply, error, request.params.token, {});
      return reply;
    }
  }

  app.get('/book/assets/booking.js', { schema: { hide: true } }, async (_request, reply) =>
    reply.headers({ ...ASSET_HEADERS, 'content-type': 'text/javascript; charset=utf-8' }).send(script),
  );
  app.get('/book/assets/booking.css', { schema: { hide: true } }, async (_request, reply) =>
    reply.headers({ ...ASSET_HEADERS, 'content-type': 'text/css; charset=utf-8' }).send(style),
  );

  app.get<{ Params: { token: string }; Querystring: Query }>(
    '/book/:token',
    { onRequest: admitVisitor, schema: { hide: true } },
    async (request, reply) => {
      const { token } = request.params;
      try {
        return await slots(reply, token, request.query);
      } catch (error) {
        return refusal(reply, error, token, request.query);
      }
    },
  );

  app.get<{ Params: { token: string }; Querystring: Query }>(
    '/book/:token/confirmed',
    { onRequest: admitVisitor, schema: { hide: true } },
    async (request, reply) => {
      const { token } = request.params;
      try {
        return await confirmed(reply, token, request.query, 200);
      } catch (error) {
        return refusal(reply, error, token, request.query);
      }
    },
  );

  app.post<{ Params: { token: string }; Body: unknown }>(
    '/book/:token',
    { onRequest: admitVisitor, schema: { hide: true }, config: { acceptsForm: true } },
    async (request, reply) => {
      const { token } = request.params;
      const form = (request.body && typeof request.body === 'object' ? request.body : {}) as Query;
      const query = { tz: form.tz, week: form.week };
      const startsAt = typeof form.starts_at === 'string' ? form.starts_at : '';
      try {
        if (startsAt === '') return await slots(reply, token, query, 422, 'Please pick a time.');
        try {
          await booking.publicBook(token, startsAt, request.id);
        } catch (error) {
          if (error instanceof AppError && error.code === 'slot_taken') {
            return await slots(reply, token, query, 409, 'That time was just taken. Please pick another.');
          }
          if (error instanceof AppError && error.code === 'validation_failed') {
            return await slots(reply, token, query, 422, 'Please pick one of the times shown.');
          }
          throw error;
        }
        const tz = typeof form.tz === 'string' ? `?tz=${encodeURIComponent(form.tz)}` : '';
        return reply.redirect(`/book/${encodeURIComponent(token)}/confirmed${tz}`, 303);
      } catch (error) {
        return refusal(reply, error, token, query);
      }
    },
  );
};
