import { useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Button, Form } from 'react-aria-components';
import { Link, useSearchParams } from 'react-router';
import { ApiError, api } from '../../lib/api.ts';
import { useT } from '../../lib/i18n.tsx';
import { SESSION_KEY, useSessionQuery } from '../../lib/session.tsx';
import { useDescribeError } from '../../ui/errors.tsx';
import { TextField } from '../../ui/fields.tsx';
import { LanguageSwitcher } from '../../ui/language.tsx';
import { Loading, PageTitle } from '../../ui/pages.tsx';
import { messages } from './messages.ts';

/**
 * Sets a password: with `?token=` from a first-start or reset link (`{token, password}`), or,
 * signed in, with the current one (`{current_password, password}`), decisions §14.
 */
export function PasswordPage() {
  const t = useT(messages);
  const describe = useDescribeError();
  const [params] = useSearchParams();
  const token = params.get('token');
  const session = useSessionQuery();
  const client = useQueryClient();
  const [current, setCurrent] = useState('');
  const [password, setPassword] = useState('');
  const [repeat, setRepeat] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState(false);

  if (session.isPending) return <Loading />;
  const signedIn = Boolean(session.data);
  const withToken = token !== null && token !== '';
  // Without a password yet (signed in by a link), the new one is enough (decisions §14).
  const needsCurrent = !withToken && session.data?.user.has_password !== false;

  async function save(event: FormEvent) {
    event.preventDefault();
    setError(null);
    if (password.length < 10) return setError(t('passwordTooShort'));
    if (password !== repeat) return setError(t('passwordsDiffer'));
    setBusy(true);
    try {
      await api('/api/v1/session/password', {
        method: 'POST',
        body: withToken
          ? { token, password }
          : current === ''
            ? { password }
            : { current_password: current, password },
        allowUnauthorized: true,
      });
      setDone(true);
      await client.invalidateQueries({ queryKey: SESSION_KEY });
    } catch (failure) {
      if (failure instanceof ApiError && failure.status === 401)
        setError(withToken ? t('linkInvalid') : t('wrongCurrent'));
      else setError(describe(failure));
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
        <PageTitle>{needsCurrent ? t('changePasswordTitle') : t('setPasswordTitle')}</PageTitle>
        {done ? (
          <>
            <p role="status">{signedIn && !withToken ? t('passwordSaved') : t('passwordSavedSignIn')}</p>
            <p>
              {signedIn && !withToken ? (
                <Link to="/">{t('toConsole')}</Link>
              ) : (
                <Link to="/login">{t('toSignIn')}</Link>
              )}
            </p>
          </>
        ) : !withToken && !signedIn ? (
          <p>
            <Link to="/login?next=%2Fpassword">{t('toSignIn')}</Link>
          </p>
        ) : (
          <Form onSubmit={save} className="form">
            {needsCurrent ? (
              <TextField
                label={t('currentPassword')}
                type="password"
                autoComplete="current-password"
                description={t('currentPasswordHint')}
                value={current}
                onChange={setCurrent}
              />
            ) : null}
            <TextField
              label={t('newPassword')}
              type="password"
              autoComplete="new-password"
              description={t('passwordRule')}
              value={password}
              onChange={setPassword}
              isRequired
            />
            <TextField
              label={t('repeatPassword')}
              type="password"
              autoComplete="new-password"
              value={repeat}
              onChange={setRepeat}
              isRequired
            />
            {error ? (
              <p className="error-text" role="alert">
                {error}
              </p>
            ) : null}
            <Button type="submit" className="button primary" isDisabled={busy}>
              {t('savePassword')}
            </Button>
          </Form>
        )}
      </div>
    </main>
  );
}
