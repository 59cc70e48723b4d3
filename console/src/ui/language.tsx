import { LOCALES, type Locale, useLocale, useT } from '../lib/i18n.tsx';
import { uiMessages } from './messages.ts';

const NAMES: Record<Locale, string> = { en: 'English', de: 'Deutsch' };

/** A native select: keyboard and screen readers know it, and it fits at 375 px. */
export function LanguageSwitcher() {
  const t = useT(uiMessages);
  const { locale, setLocale } = useLocale();
  return (
    <label className="language">
      <span>{t('language')}</span>
      <select value={locale} onChange={(event) => setLocale(event.target.value as Locale)}>
        {LOCALES.map((code) => (
          <option key={code} value={code} lang={code}>
            {NAMES[code]}
          </option>
        ))}
      </select>
    </label>
  );
}
