// The signed-in frame: skip link, header with navigation (a menu button below 720 px),
// language switcher and sign-out, and the page in <main>.
import { useEffect, useRef, useState } from 'react';
import { Button } from 'react-aria-components';
import { Link, NavLink, Outlet, useLocation } from 'react-router';
import type { NavEntry } from '../lib/area.ts';
import { useLocale, useT } from '../lib/i18n.tsx';
import { useSession } from '../lib/session.tsx';
import { LanguageSwitcher } from './language.tsx';
import { uiMessages } from './messages.ts';

export function Layout({ nav }: { nav: readonly NavEntry[] }) {
  const t = useT(uiMessages);
  const { locale } = useLocale();
  const session = useSession();
  const location = useLocation();
  const [open, setOpen] = useState(false);
  const first = useRef(true);

  const entries = nav
    .filter((entry) => !entry.module || session.hasModule(entry.module))
    .filter((entry) => !entry.capability || session.can(entry.capability))
    .sort((a, b) => a.order - b.order);

  // A new page: close the menu and move the focus to its heading, so that a screen reader
  // announces it and the keyboard starts from the top of the new content.
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs on every change of address
  useEffect(() => {
    setOpen(false);
    if (first.current) {
      first.current = false;
      return;
    }
    document.querySelector<HTMLElement>('main h1')?.focus();
  }, [location.pathname]);

  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        {t('skipToContent')}
      </a>
      <header className="topbar">
        <a className="brand" href="/">
          Leadline
        </a>
        <Button
          className="button menu-button"
          aria-expanded={open}
          aria-controls="main-nav"
          onPress={() => setOpen((value) => !value)}
        >
          {t('menu')}
        </Button>
        <nav id="main-nav" className={`main-nav ${open ? 'open' : ''}`} aria-label={t('mainNavigation')}>
          <ul>
            {entries.map((entry) => (
              <li key={entry.to}>
                <NavLink to={entry.to}>{entry.label[locale]}</NavLink>
              </li>
            ))}
          </ul>
          <div className="nav-tools">
            <LanguageSwitcher />
            <span className="who">
              {t('signedInAs', {
                name: session.user.name || session.user.email,
                role: t(`role.${session.user.role}`),
              })}
            </span>
            <NavLink to="/password">{t('password')}</NavLink>
            <Button className="button secondary" onPress={() => void session.signOut()}>
              {t('signOut')}
            </Button>
          </div>
        </nav>
      </header>
      {session.user.has_password === false && location.pathname !== '/password' ? (
        <p className="notice-bar" role="status">
          {t('noPasswordYet')} <Link to="/password">{t('setPassword')}</Link>
        </p>
      ) : null}
      <main id="main" tabIndex={-1}>
        <Outlet />
      </main>
    </div>
  );
}
