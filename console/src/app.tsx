import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { RouterProvider as AriaRouterProvider } from 'react-aria-components';
import { createBrowserRouter, Navigate, Outlet, RouterProvider, useHref, useNavigate } from 'react-router';
import { ApiError } from './lib/api.ts';
import type { Area } from './lib/area.ts';
import { LocaleProvider } from './lib/i18n.tsx';
import { RequireSession } from './lib/session.tsx';
import * as registry from './registry.ts';
import { Layout } from './ui/layout.tsx';
import { Loading, NotFound, RouteError } from './ui/pages.tsx';
import { ToastProvider } from './ui/toast.tsx';

const areas: Area[] = Object.values(registry satisfies Record<string, Area>);
const nav = areas.flatMap((area) => (area.nav ? [area.nav] : [])).sort((a, b) => a.order - b.order);

/** React Aria's links (table rows, buttons with href) navigate through the router. */
function Root() {
  const navigate = useNavigate();
  return (
    <AriaRouterProvider navigate={(to) => void navigate(to)} useHref={useHref}>
      <ToastProvider>
        <Outlet />
      </ToastProvider>
    </AriaRouterProvider>
  );
}

const router = createBrowserRouter([
  {
    element: <Root />,
    errorElement: <RouteError />,
    children: [
      ...areas.flatMap((area) => area.publicRoutes ?? []),
      {
        element: (
          <RequireSession fallback={<Loading />}>
            <Layout nav={nav} />
          </RequireSession>
        ),
        children: [
          {
            errorElement: <RouteError />,
            children: [
              { index: true, element: <Navigate to={nav[0]?.to ?? '/records'} replace /> },
              ...areas.flatMap((area) => area.routes),
              { path: '*', element: <NotFound /> },
            ],
          },
        ],
      },
    ],
  },
]);

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      // 4xx answers do not get better by asking again; network failures and 5xx may.
      retry: (count, error) =>
        count < 2 && !(error instanceof ApiError && error.status >= 400 && error.status < 500),
      refetchOnWindowFocus: true,
    },
  },
});

export function App() {
  return (
    <QueryClientProvider client={queryClient}>
      <LocaleProvider>
        <RouterProvider router={router} />
      </LocaleProvider>
    </QueryClientProvider>
  );
}
