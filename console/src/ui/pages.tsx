import type { ReactNode } from 'react';
import { Link, useRouteError } from 'react-router';
import { ApiError } from '../lib/api.ts';
import { useT } from '../lib/i18n.tsx';
import { useDescribeError } from './errors.tsx';
import { uiMessages } from './messages.ts';

/** The page's heading; it takes the focus after navigation (see Layout). */
export function PageTitle({ children, actions }: { children: ReactNode; actions?: ReactNode }) {
  return (
    <div className="page-title">
      <h1 tabIndex={-1}>{children}</h1>
      {actions ? <div className="page-actions">{actions}</div> : null}
    </div>
  );
}

export function Loading() {
  const t = useT(uiMessages);
  return (
    <p className="loading" role="status">
      {t('loading')}
    </p>
  );
}

export function NotFound() {
  const t = useT(uiMessages);
  return (
    <section className="not-found">
      <PageTitle>{t('notFoundTitle')}</PageTitle>
      <p>{t('notFoundText')}</p>
      <p>
        <Link to="/">{t('backToStart')}</Link>
      </p>
    </section>
  );
}

/** The route error element: a 404 from the service is the not-found page, anything else says what failed. */
export function RouteError() {
  const error = useRouteError();
  const t = useT(uiMessages);
  const describe = useDescribeError();
  if (error instanceof ApiError && error.status === 404) return <NotFound />;
  return (
    <section>
      <PageTitle>{t('errorTitle')}</PageTitle>
      <p role="alert">{describe(error)}</p>
      <p>
        <Link to="/">{t('backToStart')}</Link>
      </p>
    </section>
  );
}
