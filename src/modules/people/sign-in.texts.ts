import { htmlDocument } from '../../lib/html.ts';
import { escapeHtml } from '../../lib/text.ts';
import type { EmailContent } from '../../outbound/mail-sender.ts';

/** The words of the sign-in email and of the page of an unusable link, in English and German. */
export type Language = 'en' | 'de';
export const LANGUAGES: Language[] = ['en', 'de'];

const TEXTS = {
  en: {
    subject: (account: string) => `Your sign-in link for ${account}`,
    body: (name: string, account: string, link: string, minutes: number) =>
      `Hello ${name},\n\nopen this link to sign in to ${account} on Leadline:\n\n${link}\n\n` +
      `The link works once, within ${minutes} ${minutes === 1 ? 'minute' : 'minutes'}. ` +
      'If you did not ask for it, you can ignore this email.\n',
    pageTitle: 'This sign-in link cannot be used',
    pageBody: 'Sign-in links work once and only for a short time. Ask for a new link on the sign-in page.',
    signIn: 'Go to sign-in',
  },
  de: {
    subject: (account: string) => `Ihr Anmeldelink für ${account}`,
    body: (name: string, account: string, link: string, minutes: number) =>
      `Hallo ${name},\n\nmit diesem Link melden Sie sich bei ${account} in Leadline an:\n\n${link}\n\n` +
      `Der Link gilt einmal, innerhalb von ${minutes} ${minutes === 1 ? 'Minute' : 'Minuten'}. ` +
      'Wenn Sie ihn nicht angefordert haben, können Sie diese E-Mail ignorieren.\n',
    pageTitle: 'Dieser Anmeldelink ist nicht mehr gültig',
    pageBody:
      'Anmeldelinks gelten nur einmal und nur kurze Zeit. Fordern Sie auf der Anmeldeseite einen neuen Link an.',
    signIn: 'Zur Anmeldung',
  },
} as const;

export function signInEmail(
  language: Language,
  mail: { to: string; name: string; account: string; link: string; ttlMs: number },
): EmailContent {
  const texts = TEXTS[language];
  const minutes = Math.max(1, Math.round(mail.ttlMs / 60_000));
  return {
    to: [mail.to],
    subject: texts.subject(mail.account),
    text: texts.body(mail.name, mail.account, mail.link, minutes),
  };
}

/** The page of a link that is unknown, used or expired: what happened and where to go. */
export function unusableLinkPage(language: Language): string {
  const texts = TEXTS[language];
  return htmlDocument({
    language,
    title: texts.pageTitle,
    head: `<style>
body{font-family:system-ui,sans-serif;line-height:1.5;margin:0;color:#1a1a1a;background:#fff}
main{max-width:36rem;margin:3rem auto;padding:0 1rem}
h1{font-size:1.5rem}
a{color:#0645ad}
a:focus{outline:3px solid #1a1a1a;outline-offset:2px}
@media (prefers-color-scheme:dark){body{color:#eee;background:#121212}a{color:#8ab4f8}a:focus{outline-color:#eee}}
</style>
`,
    main: `<h1>${escapeHtml(texts.pageTitle)}</h1>
<p role="alert">${escapeHtml(texts.pageBody)}</p>
<p><a href="/">${escapeHtml(texts.signIn)}</a></p>`,
  });
}
