import { htmlDocument } from '../../lib/html.ts';
import { escapeHtml } from '../../lib/text.ts';
import type { EmailContent } from '../../outbound/mail-sender.ts';

/** The words of the sign-in email and of the page of an unusable link, in English and German. */
export type Language = 'en' | 'de';
export const LANGUAGES: Language[] = ['en', 'de'];

const UNITS = {
  en: {
    seconds: ['second', 'seconds'],
    minutes: ['minute', 'minutes'],
    hours: ['hour', 'hours'],
    days: ['day', 'days'],
  },
  de: {
    seconds: ['Sekunde', 'Sekunden'],
    minutes: ['Minute', 'Minuten'],
    hours: ['Stunde', 'Stunden'],
    days: ['Tag', 'Tagen'],
  },
} as const;

/**
 * A link's lifetime as the email states it, a whole number of one unit ("7 days", "15 Minuten"):
 * whole days, hours or minutes when the lifetime is one, else rounded down to the minute, or
 * seconds under a minute (LEADS_SIGNIN_LINK_TTL_S takes any number of seconds): the email never
 * promises more time than the link has.
 */
function statedLifetime(language: Language, ttlMs: number): string {
  const stated = (count: number, unit: keyof (typeof UNITS)['en']) =>
    `${count} ${UNITS[language][unit][count === 1 ? 0 : 1]}`;
  const seconds = Math.max(1, Math.floor(ttlMs / 1000));
  if (seconds % 86_400 === 0) return stated(seconds / 86_400, 'days');
  if (seconds % 3600 === 0) return stated(seconds / 3600, 'hours');
  if (seconds >= 60) return stated(Math.floor(seconds / 60), 'minutes');
  return stated(seconds, 'seconds');
}

/** An email carrying a one-time sign-in link: its words, and the link with its lifetime. */
interface LinkEmailTexts {
  subject: (account: string) => string;
  body: (name: string, account: string, link: string, lifetime: string) => string;
}
interface LinkEmail {
  to: string;
  name: string;
  account: string;
  link: string;
  ttlMs: number;
}

function linkEmail(language: Language, texts: LinkEmailTexts, mail: LinkEmail): EmailContent {
  return {
    to: [mail.to],
    subject: texts.subject(mail.account),
    text: texts.body(mail.name, mail.account, mail.link, statedLifetime(language, mail.ttlMs)),
  };
}

const TEXTS = {
  en: {
    subject: (account: string) => `Your sign-in link for ${account}`,
    body: (name: string, account: string, link: string, lifetime: string) =>
      `Hello ${name},\n\nopen this link to sign in to ${account} on Leadline:\n\n${link}\n\n` +
      `The link works once, within ${lifetime}. ` +
      'If you did not ask for it, you can ignore this email.\n',
    pageTitle: 'This sign-in link cannot be used',
    pageBody: 'Sign-in links work once and only for a short time. Ask for a new link on the sign-in page.',
    signIn: 'Go to sign-in',
  },
  de: {
    subject: (account: string) => `Ihr Anmeldelink für ${account}`,
    body: (name: string, account: string, link: string, lifetime: string) =>
      `Hallo ${name},\n\nmit diesem Link melden Sie sich bei ${account} in Leadline an:\n\n${link}\n\n` +
      `Der Link gilt einmal, innerhalb von ${lifetime}. ` +
      'Wenn Sie ihn nicht angefordert haben, können Sie diese E-Mail ignorieren.\n',
    pageTitle: 'Dieser Anmeldelink ist nicht mehr gültig',
    pageBody:
      'Anmeldelinks gelten nur einmal und nur kurze Zeit. Fordern Sie auf der Anmeldeseite einen neuen Link an.',
    signIn: 'Zur Anmeldung',
  },
} as const;

export function signInEmail(language: Language, mail: LinkEmail): EmailContent {
  return linkEmail(language, TEXTS[language], mail);
}

const INVITATION_TEXTS = {
  en: {
    subject: (account: string) => `You are invited to ${account} on Leadline`,
    body: (name: string, account: string, link: string, lifetime: string) =>
      `Hello ${name},\n\nyou have been added to ${account} on Leadline. Open this link to sign in; ` +
      `you can then choose a password:\n\n${link}\n\n` +
      `The link works once, within ${lifetime}. ` +
      'After that, ask for a sign-in link on the sign-in page with this email address.\n',
  },
  de: {
    subject: (account: string) => `Einladung zu ${account} in Leadline`,
    body: (name: string, account: string, link: string, lifetime: string) =>
      `Hallo ${name},\n\nSie wurden zu ${account} in Leadline hinzugefügt. Mit diesem Link melden Sie sich ` +
      `an und können danach ein Passwort wählen:\n\n${link}\n\n` +
      `Der Link gilt einmal, innerhalb von ${lifetime}. ` +
      'Danach fordern Sie auf der Anmeldeseite mit dieser E-Mail-Adresse einen Anmeldelink an.\n',
  },
} as const;

/** The email of a person added with an invitation: a sign-in link of the invitation's lifetime. */
export function invitationEmail(language: Language, mail: LinkEmail): EmailContent {
  return linkEmail(language, INVITATION_TEXTS[language], mail);
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
