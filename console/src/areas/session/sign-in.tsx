import { type FormEvent, useState } from 'react';
import { Button, Form } from 'react-aria-components';
import { Navigate, useNavigate, useSearchParams } from 'react-router';
import { ApiError, api } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { type SessionBody, useAcceptSession, useSessionQuery } from '../../lib/session.tsx';
import { useDescribeError } from '../../ui/errors.tsx';
import { TextField } from '../../ui/fields.tsx';
import { LanguageSwitcher } from '../../ui/language.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { messages } from './messages.ts';

/** Only addresses of the console itself: `next` must never lead to another site. */
export function safeNext(next: string | null): string {
  return next?.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/';
}

export function SignInPage() {
  const t = useT(messages);
  const describe = useDescribeError();
  const navigate = useNavigate();
  const [params] = useSearchParams();
  const session = useSessionQuery();
  const accept = useAcceptSession();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const next = safeNext(params.get('next'));

  if (session.isPending) return <Loading />;
  if (session.data) return <Navigate to={next} replace />;

  async function signIn(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    setNotice(null);
    try {
      const body = await api<SessionBody>('/api/v1/session', {
        method: 'POST',
        body: { email, password },
        allowUnauthorized: true,
      });
      accept(body);
      void navigate(next, { replace: true });
    } catch (failure) {
      setError(
        failure instanceof ApiError && failure.status === 401 ? t('invalidCredentials') : describe(failure),
      );
    } finally {
      setBusy(false);
    }
  }

  async function sendLink() {
    setError(null);
    setNotice(null);
    if (email.trim() === '') {
      setError(t('emailNeeded'));
      return;
    }
    setBusy(true);
    try {
      await api('/api/v1/session/link', {
        method: 'POST',
        body: { email: email.trim() },
        allowUnauthorized: true,
      });
      setNotice(t('emailLinkSent', { email: email.trim() }));
    } catch (failure) {
      setError(describe(failure));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" className="auth-page" tabIndex={-1}>
      <div className="auth-card">
        <div className="auth-tools">
          <LanguageSwitcher />
        </div>
        <PageTitle>{t('signInTitle')}</PageTitle>
        <Form onSubmit={signIn} className="form">
          <TextField
            label={t('email')}
            type="email"
            name="email"
            autoComplete="username"
            value={email}
            onChange={setEmail}
            isRequired
            autoFocus
          />
          <TextField
            label={t('password')}
            type="password"
            name="password"
            autoComplete="current-password"
            value={password}
            onChange={setPassword}
          />
          {error ? (
            <p className="error-text" role="alert">
              {error}
            </p>
          ) : null}
          <Button type="submit" className="button primary" isDisabled={busy}>
            {busy ? t('signingIn') : t('signIn')}
          </Button>
        </Form>
        <section className="auth-alt" aria-labelledby="email-link-title">
          <h2 id="email-link-title">{t('emailLinkTitle')}</h2>
          <p>{t('emailLinkText')}</p>
          <Button className="button secondary" isDisabled={busy} onPress={() => void sendLink()}>
            {t('emailLink')}
          </Button>
          <p role="status" className="notice">
            {notice}
          </p>
        </section>
      </div>
    </main>
  );
}
