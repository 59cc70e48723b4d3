import type { ReactNode } from 'react';
import { Navigate } from 'react-router';
import type { Area } from '../../lib/area.ts';
import { useT } from '../../lib/i18n.tsx';
import { type Capability, useSession } from '../../lib/session.tsx';
import { PageTitle } from '../../ui/pages.tsx';
import { ApiKeysScreen } from './api-keys.tsx';
import { CalendarScreen, CalendarsScreen } from './calendars.tsx';
import { EntitiesScreen, EntityScreen } from './entities.tsx';
import { messages } from './messages.ts';
import { SourceScreen, SourcesScreen } from './sources.tsx';
import { UsersScreen } from './users.tsx';
import { WebhookScreen, WebhooksScreen } from './webhooks.tsx';

/** A settings screen for roles that may use it (and accounts with its module); else a refusal. */
function Guard({
  capability = 'settings',
  module,
  children,
}: {
  capability?: Capability;
  module?: string;
  children: ReactNode;
}) {
  const t = useT(messages);
  const session = useSession();
  if (session.can(capability) && (!module || session.hasModule(module))) return <>{children}</>;
  return (
    <section>
      <PageTitle>{t('settings')}</PageTitle>
      <p role="alert">{session.can(capability) ? t('moduleMissing') : t('roleMayNot')}</p>
    </section>
  );
}

export const area: Area = {
  id: 'settings',
  nav: { to: '/settings', label: { en: 'Settings', de: 'Einstellungen' }, order: 90, capability: 'settings' },
  routes: [
    { path: '/settings', element: <Navigate to="/settings/api-keys" replace /> },
    {
      path: '/settings/api-keys',
      element: (
        <Guard>
          <ApiKeysScreen />
        </Guard>
      ),
    },
    {
      path: '/settings/sources',
      element: (
        <Guard>
          <SourcesScreen />
        </Guard>
      ),
    },
    {
      path: '/settings/sources/:id',
      element: (
        <Guard>
          <SourceScreen />
        </Guard>
      ),
    },
    {
      path: '/settings/entities',
      element: (
        <Guard>
          <EntitiesScreen />
        </Guard>
      ),
    },
    {
      path: '/settings/entities/:key',
      element: (
        <Guard>
          <EntityScreen />
        </Guard>
      ),
    },
    {
      path: '/settings/calendars',
      element: (
        <Guard module="booking">
          <CalendarsScreen />
        </Guard>
      ),
    },
    {
      path: '/settings/calendars/:id',
      element: (
        <Guard module="booking">
          <CalendarScreen />
        </Guard>
      ),
    },
    {
      path: '/settings/webhooks',
      element: (
        <Guard>
          <WebhooksScreen />
        </Guard>
      ),
    },
    {
      path: '/settings/webhooks/:id',
      element: (
        <Guard>
          <WebhookScreen />
        </Guard>
      ),
    },
    {
      path: '/settings/users',
      element: (
        <Guard capability="users">
          <UsersScreen />
        </Guard>
      ),
    },
  ],
};
