// Booking calendars (decisions §11): list, create and edit, with weekly hours and exceptions.
// Hours are typed as "09:00-12:00, 13:00-17:00"; the service checks them (overlaps, order).
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Button } from 'react-aria-components';
import { Link, useNavigate, useParams } from 'react-router';
import { api } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { ErrorText, useDescribeError } from '../../ui/errors.tsx';
import { TextField } from '../../ui/fields.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { type ColumnDef, DataTable } from '../../ui/table.tsx';
import { useToast } from '../../ui/toast.tsx';
import { type Calendar, type Hours, WEEKDAYS, type Weekday } from './api.ts';
import { messages } from './messages.ts';
import { CheckboxField, ConfirmButton, errorsOf, lines, SettingsNav } from './parts.tsx';

const CALENDARS = ['settings', 'calendars'] as const;
const BASE = '/api/v1/settings/booking/calendars';

export function CalendarsScreen() {
  const t = useT(messages);
  const list = useQuery({
    queryKey: CALENDARS,
    queryFn: ({ signal }) => api<{ calendars: Calendar[] }>(BASE, { query: { limit: 100 }, signal }),
  });
  const columns: ColumnDef<Calendar>[] = [
    {
      id: 'name',
      label: t('name'),
      render: (c) => <Link to={`/settings/calendars/${c.id}`}>{c.name}</Link>,
      alwaysVisible: true,
    },
    { id: 'time_zone', label: t('timeZone'), render: (c) => c.time_zone },
    { id: 'slot', label: t('slotMinutes'), render: (c) => c.slot_minutes },
    { id: 'capacity', label: t('capacity'), render: (c) => c.capacity },
    { id: 'default', label: t('defaultCalendar'), render: (c) => (c.default ? t('yes') : '') },
  ];
  return (
    <section>
      <SettingsNav />
      <PageTitle
        actions={
          <Link className="button primary link-button" to="/settings/calendars/new">
            {t('newCalendar')}
          </Link>
        }
      >
        {t('calendars')}
      </PageTitle>
      <p className="muted">{t('calendarsIntro')}</p>
      {list.isPending ? <Loading /> : null}
      <ErrorText error={list.error} />
      {list.data ? (
        <DataTable
          label={t('calendars')}
          columns={columns}
          rows={list.data.calendars}
          rowId={(c) => c.id}
          empty={t('noCalendars')}
        />
      ) : null}
    </section>
  );
}

export function CalendarScreen() {
  const t = useT(messages);
  const { id = 'new' } = useParams();
  const isNew = id === 'new';
  const calendar = useQuery({
    queryKey: [...CALENDARS, id],
    queryFn: ({ signal }) => api<Calendar>(`${BASE}/${id}`, { signal }),
    enabled: !isNew,
  });
  if (calendar.isError) throw calendar.error;
  return (
    <section>
      <SettingsNav />
      <PageTitle>{isNew ? t('newCalendar') : calendar.data ? calendar.data.name : t('calendars')}</PageTitle>
      <p>
        <Link to="/settings/calendars">{t('backToCalendars')}</Link>
      </p>
      {isNew ? (
        <CalendarForm calendar={null} />
      ) : calendar.data ? (
        <CalendarForm key={calendar.data.updated_at} calendar={calendar.data} />
      ) : (
        <Loading />
      )}
    </section>
  );
}

function hoursText(hours: Hours): string {
  return hours.map(([from, to]) => `${from}-${to}`).join(', ');
}

/** "09:00-12:00, 13:00-17:00" → windows; null when a part is not "HH:MM-HH:MM". */
function parseHours(text: string): Hours | null {
  const parts = text
    .split(/[,;]/)
    .map((part) => part.trim())
    .filter((part) => part !== '');
  const windows: Hours = [];
  for (const part of parts) {
    const match = /^(\d{1,2}:\d{2})\s*[-–]\s*(\d{1,2}:\d{2})$/.exec(part);
    if (!match) return null;
    windows.push([match[1]!.padStart(5, '0'), match[2]!.padStart(5, '0')]);
  }
  return windows;
}

/** "2026-12-24: closed" or "2026-12-24: 10:00-12:00" per line. */
function parseExceptions(text: string): { date: string; hours: Hours }[] | null {
  const out: { date: string; hours: Hours }[] = [];
  for (const line of lines(text)) {
    const match = /^(\d{4}-\d{2}-\d{2})\s*:?\s*(.*)$/.exec(line);
    if (!match) return null;
    const rest = match[2]!.trim();
    const hours = rest === '' || /^(closed|geschlossen|-)$/i.test(rest) ? [] : parseHours(rest);
    if (hours === null) return null;
    out.push({ date: match[1]!, hours });
  }
  return out;
}

function CalendarForm({ calendar }: { calendar: Calendar | null }) {
  const t = useT(messages);
  const toast = useToast();
  const describe = useDescribeError();
  const navigate = useNavigate();
  const client = useQueryClient();
  const [form, setForm] = useState({
    name: calendar?.name ?? '',
    time_zone: calendar?.time_zone ?? Intl.DateTimeFormat().resolvedOptions().timeZone,
    slot_minutes: String(calendar?.slot_minutes ?? 30),
    buffer_minutes: String(calendar?.buffer_minutes ?? 0),
    min_notice_minutes: String(calendar?.min_notice_minutes ?? 60),
    horizon_days: String(calendar?.horizon_days ?? 30),
    capacity: String(calendar?.capacity ?? 1),
    exceptions: (calendar?.exceptions ?? [])
      .map((e) => `${e.date}: ${e.hours.length === 0 ? 'closed' : hoursText(e.hours)}`)
      .join('\n'),
  });
  const [weekly, setWeekly] = useState<Record<Weekday, string>>(
    () =>
      Object.fromEntries(
        WEEKDAYS.map((day) => [
          day,
          calendar
            ? hoursText(calendar.weekly[day] ?? [])
            : ['sat', 'sun'].includes(day)
              ? ''
              : '09:00-17:00',
        ]),
      ) as Record<Weekday, string>,
  );
  const [isDefault, setDefault] = useState(calendar?.default ?? false);
  const [local, setLocal] = useState<Record<string, string>>({});
  const set = (key: keyof typeof form) => (value: string) => setForm((f) => ({ ...f, [key]: value }));

  const save = useMutation({
    mutationFn: async () => {
      const problems: Record<string, string> = {};
      const hours: Partial<Record<Weekday, Hours>> = {};
      for (const day of WEEKDAYS) {
        const parsed = parseHours(weekly[day]);
        if (parsed === null) problems[`weekly.${day}`] = t('hoursFormat');
        else hours[day] = parsed;
      }
      const exceptions = parseExceptions(form.exceptions);
      if (exceptions === null) problems.exceptions = t('exceptionsFormat');
      setLocal(problems);
      if (Object.keys(problems).length > 0) return null;
      const number = (value: string) => (value.trim() === '' ? undefined : Number(value));
      const body = {
        name: form.name.trim(),
        time_zone: form.time_zone.trim(),
        slot_minutes: number(form.slot_minutes),
        buffer_minutes: number(form.buffer_minutes),
        min_notice_minutes: number(form.min_notice_minutes),
        horizon_days: number(form.horizon_days),
        capacity: number(form.capacity),
        weekly: hours,
        exceptions: exceptions ?? [],
        // The default calendar cannot be unset by itself (make another the default).
        ...(isDefault || !calendar?.default ? { default: isDefault } : {}),
      };
      return calendar
        ? api<Calendar>(`${BASE}/${calendar.id}`, { method: 'PATCH', body })
        : api<Calendar>(BASE, { method: 'POST', body });
    },
    onSuccess: (saved) => {
      if (!saved) return;
      toast.show(t('saved'));
      void client.invalidateQueries({ queryKey: CALENDARS });
      if (!calendar) void navigate(`/settings/calendars/${saved.id}`, { replace: true });
    },
  });
  const remove = useMutation({
    mutationFn: () => api(`${BASE}/${calendar?.id}`, { method: 'DELETE' }),
    onSuccess: () => {
      toast.show(t('calendarDeleted'));
      void client.invalidateQueries({ queryKey: CALENDARS });
      void navigate('/settings/calendars');
    },
    onError: (error) => toast.show(describe(error), 'error'),
  });
  const errors = { ...errorsOf(save.error), ...local };
  const byPrefix = (prefix: string) =>
    Object.entries(errors).find(([key]) => key === prefix || key.startsWith(`${prefix}.`))?.[1] ?? null;
  const shown = new Set([
    'name',
    'time_zone',
    'slot_minutes',
    'buffer_minutes',
    'min_notice_minutes',
    'horizon_days',
    'capacity',
    'default',
  ]);
  const other = Object.entries(errors).filter(
    ([key]) => !shown.has(key) && !key.startsWith('weekly') && !key.startsWith('exceptions'),
  );

  return (
    <form
      className="form"
      aria-label={calendar ? calendar.name : t('newCalendar')}
      onSubmit={(event) => {
        event.preventDefault();
        save.mutate();
      }}
    >
      <div className="panel form">
        <div className="grid-2">
          <TextField
            label={t('name')}
            value={form.name}
            onChange={set('name')}
            isRequired
            error={errors.name}
          />
          <TextField
            label={t('timeZone')}
            value={form.time_zone}
            onChange={set('time_zone')}
            isRequired
            description={t('timeZoneHelp')}
            error={errors.time_zone}
          />
        </div>
        <div className="field-grid">
          {(
            ['slot_minutes', 'buffer_minutes', 'min_notice_minutes', 'horizon_days', 'capacity'] as const
          ).map((key) => (
            <TextField
              key={key}
              label={t(
                (
                  {
                    slot_minutes: 'slotMinutes',
                    buffer_minutes: 'bufferMinutes',
                    min_notice_minutes: 'minNotice',
                    horizon_days: 'horizonDays',
                    capacity: 'capacity',
                  } as const
                )[key],
              )}
              type="number"
              inputMode="numeric"
              value={form[key]}
              onChange={set(key)}
              error={errors[key]}
            />
          ))}
        </div>
        <CheckboxField
          label={t('defaultCalendar')}
          description={t('defaultHelp')}
          isSelected={isDefault}
          onChange={setDefault}
          isDisabled={calendar?.default === true}
        />
      </div>
      <fieldset className="panel">
        <legend>{t('weeklyHours')}</legend>
        <p className="muted">{t('weeklyHelp')}</p>
        <div className="field-grid">
          {WEEKDAYS.map((day) => (
            <TextField
              key={day}
              label={t(`day.${day}`)}
              value={weekly[day]}
              onChange={(value) => setWeekly((w) => ({ ...w, [day]: value }))}
              placeholder={t('closed')}
              error={byPrefix(`weekly.${day}`)}
            />
          ))}
        </div>
      </fieldset>
      <div className="panel">
        <TextField
          label={t('exceptions')}
          multiline
          value={form.exceptions}
          onChange={set('exceptions')}
          description={t('exceptionsHelp')}
          error={byPrefix('exceptions')}
        />
      </div>
      {other.length > 0 ? (
        <ul className="error-text" role="alert">
          {other.map(([key, message]) => (
            <li key={key}>
              <code>{key}</code>: {message}
            </li>
          ))}
        </ul>
      ) : null}
      <ErrorText error={save.error && Object.keys(errorsOf(save.error)).length === 0 ? save.error : null} />
      <div className="form-actions">
        <Button type="submit" className="button primary" isDisabled={save.isPending}>
          {calendar ? t('save') : t('createCalendar')}
        </Button>
        {calendar ? (
          <ConfirmButton
            label={t('deleteCalendar')}
            title={t('deleteCalendarTitle', { name: calendar.name })}
            text={t('deleteCalendarText')}
            confirmLabel={t('deleteCalendar')}
            onConfirm={() => remove.mutate()}
          />
        ) : null}
      </div>
    </form>
  );
}
