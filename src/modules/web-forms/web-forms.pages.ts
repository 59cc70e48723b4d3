import type { ValidationDetail } from '../../http/errors.ts';
import { htmlDocument } from '../../lib/html.ts';
import { escapeHtml } from '../../lib/text.ts';

/**
 * The small pages a browser's form post gets when its source names no address to send it to
 * (decisions §13): readable, accessible (a language, one heading, the problem as an alert, a way
 * back), in English or German, without scripts or outside resources, never a stack trace.
 */

export type Language = 'en' | 'de';
export const LANGUAGES: Language[] = ['en', 'de'];

interface Texts {
  receivedTitle: string;
  receivedBody: string;
  refusedTitle: string;
  back: string;
  problems: string;
  reasons: Record<string, string>;
  anyReason: string;
  codes: Record<string, string>;
  anyCode: string;
  retryIn: (seconds: number) => string;
}

const TEXTS: Record<Language, Texts> = {
  en: {
    receivedTitle: 'Thank you!',
    receivedBody: 'Your form was received.',
    refusedTitle: 'The form was not sent',
    back: 'Back to the form',
    problems: 'Please check these entries:',
    reasons: {
      required: 'is required',
      invalid_format: 'has an invalid format',
      invalid_type: 'has a value of the wrong kind',
      not_allowed: 'is not one of the allowed choices',
      out_of_range: 'is too long or out of range',
      too_long: 'is too long',
      invalid_characters: 'contains characters that cannot be stored',
    },
    anyReason: 'is not valid',
    codes: {
      validation_failed: 'Some entries are missing or not valid.',
      unauthorized: 'This form is not connected to an active source of the service.',
      origin_not_allowed: 'This form may not be sent from the page it is on.',
      rate_limited: 'Too many forms were sent from your address.',
      payload_too_large: 'The form is too large to be sent.',
      invalid_body: 'The form could not be read.',
      unsupported_media_type: 'The form could not be read.',
      unknown_entity: 'The form is not set up correctly.',
      invalid_idempotency_key: 'The form is not set up correctly.',
      idempotency_key_reused: 'This form was already sent with other entries.',
      idempotency_key_in_use: 'This form is still being sent. Please wait a moment.',
    },
    anyCode: 'The form could not be processed. Please try again later.',
    retryIn: (seconds) => `Please try again in ${seconds} ${seconds === 1 ? 'second' : 'seconds'}.`,
  },
  de: {
    receivedTitle: 'Vielen Dank!',
    receivedBody: 'Ihr Formular ist eingegangen.',
    refusedTitle: 'Das Formular wurde nicht gesendet',
    back: 'Zurück zum Formular',
    problems: 'Bitte prüfen Sie diese Angaben:',
    reasons: {
      required: 'fehlt',
      invalid_format: 'hat ein ungültiges Format',
      invalid_type: 'hat einen Wert der falschen Art',
      not_allowed: 'ist keine der erlaubten Auswahlen',
      out_of_range: 'ist zu lang oder außerhalb des Bereichs',
      too_long: 'ist zu lang',
      invalid_characters: 'enthält Zeichen, die nicht gespeichert werden können',
    },
    anyReason: 'ist ungültig',
    codes: {
      validation_failed: 'Einige Angaben fehlen oder sind ungültig.',
      unauthorized: 'Dieses Formular ist mit keiner aktiven Quelle des Dienstes verbunden.',
      origin_not_allowed: 'Dieses Formular darf von der Seite, auf der es steht, nicht gesendet werden.',
      rate_limited: 'Von Ihrer Adresse wurden zu viele Formulare gesendet.',
      payload_too_large: 'Das Formular ist zu groß, um gesendet zu werden.',
      invalid_body: 'Das Formular konnte nicht gelesen werden.',
      unsupported_media_type: 'Das Formular konnte nicht gelesen werden.',
      unknown_entity: 'Das Formular ist nicht richtig eingerichtet.',
      invalid_idempotency_key: 'Das Formular ist nicht richtig eingerichtet.',
      idempotency_key_reused: 'Dieses Formular wurde bereits mit anderen Angaben gesendet.',
      idempotency_key_in_use: 'Dieses Formular wird noch gesendet. Bitte warten Sie einen Moment.',
    },
    anyCode: 'Das Formular konnte nicht verarbeitet werden. Bitte versuchen Sie es später erneut.',
    retryIn: (seconds) =>
      `Bitte versuchen Sie es in ${seconds} ${seconds === 1 ? 'Sekunde' : 'Sekunden'} erneut.`,
  },
};

/** Problems listed on one page; a body full of them shows the first ones. */
const DETAILS_SHOWN = 20;

function page(language: Language, title: string, content: string, backTo: string | null): string {
  const back = backTo ? `<p><a href="${escapeHtml(backTo)}">${escapeHtml(TEXTS[language].back)}</a></p>` : '';
  return htmlDocument({
    language,
    title,
    head: `<style>
body{font-family:system-ui,sans-serif;line-height:1.5;margin:0;color:#1a1a1a;background:#fff}
main{max-width:36rem;margin:3rem auto;padding:0 1rem}
h1{font-size:1.5rem}
a{color:#0645ad}
a:focus{outline:3px solid #1a1a1a;outline-offset:2px}
@media (prefers-color-scheme:dark){body{color:#eee;background:#121212}a{color:#8ab4f8}a:focus{outline-color:#eee}}
</style>
`,
    main: `<h1>${escapeHtml(title)}</h1>
${content}
${back}`,
  });
}

/** The page of a received form. */
export function receivedPage(language: Language, backTo: string | null): string {
  const texts = TEXTS[language];
  return page(
    language,
    texts.receivedTitle,
    `<p role="status">${escapeHtml(texts.receivedBody)}</p>`,
    backTo,
  );
}

export interface RefusalView {
  code: string;
  details?: ValidationDetail[];
  retryAfterSeconds?: number;
}

/** The page of a refused form: what was wrong, in words a visitor understands. */
export function refusedPage(language: Language, refusal: RefusalView, backTo: string | null): string {
  const texts = TEXTS[language];
  const lines = [`<p>${escapeHtml(texts.codes[refusal.code] ?? texts.anyCode)}</p>`];
  if (refusal.retryAfterSeconds !== undefined) {
    lines.push(`<p>${escapeHtml(texts.retryIn(refusal.retryAfterSeconds))}</p>`);
  }
  const details = (refusal.details ?? []).slice(0, DETAILS_SHOWN);
  if (details.length > 0) {
    const items = details
      .map((detail) => {
        const reason = texts.reasons[detail.reason] ?? texts.anyReason;
        return `<li><strong>${escapeHtml(detail.key)}</strong> ${escapeHtml(reason)}</li>`;
      })
      .join('');
    lines.push(`<p>${escapeHtml(texts.problems)}</p><ul>${items}</ul>`);
  }
  return page(language, texts.refusedTitle, `<div role="alert">${lines.join('\n')}</div>`, backTo);
}
