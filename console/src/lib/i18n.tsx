// English and German. Every area keeps its own message files (messages.en.ts, messages.de.ts);
// the German one must have every key of the English one (the type checker says so).
import { createContext, type ReactNode, useCallback, useContext, useEffect, useMemo, useState } from 'react';
import { I18nProvider } from 'react-aria-components';

export const LOCALES = ['en', 'de'] as const;
export type Locale = (typeof LOCALES)[number];
const STORAGE_KEY = 'leadline.locale';

export type Messages = Record<string, string>;
/** An area's messages: English, and German with exactly the same keys. */
export interface MessageSet<M extends Messages> {
  en: M;
  de: { [K in keyof M]: string };
}

export function defineMessages<M extends Messages>(en: M, de: { [K in keyof M]: string }): MessageSet<M> {
  return { en, de };
}

function browserLocale(): Locale {
  const stored = globalThis.localStorage?.getItem(STORAGE_KEY);
  if (stored === 'en' || stored === 'de') return stored;
  for (const language of navigator.languages ?? [navigator.language]) {
    const base = language.toLowerCase().split('-')[0];
    if (base === 'de') return 'de';
    if (base === 'en') return 'en';
  }
  return 'en';
}

interface LocaleState {
  locale: Locale;
  setLocale(locale: Locale): void;
}

const LocaleContext = createContext<LocaleState>({ locale: 'en', setLocale: () => {} });

export function LocaleProvider({ children }: { children: ReactNode }) {
  const [locale, setLocaleState] = useState<Locale>(browserLocale);
  const setLocale = useCallback((next: Locale) => {
    localStorage.setItem(STORAGE_KEY, next);
    setLocaleState(next);
  }, []);
  useEffect(() => {
    document.documentElement.lang = locale;
  }, [locale]);
  const value = useMemo(() => ({ locale, setLocale }), [locale, setLocale]);
  return (
    <LocaleContext.Provider value={value}>
      <I18nProvider locale={locale === 'de' ? 'de-DE' : 'en-GB'}>{children}</I18nProvider>
    </LocaleContext.Provider>
  );
}

export function useLocale(): LocaleState {
  return useContext(LocaleContext);
}

export type Translate<M extends Messages> = (
  key: keyof M & string,
  vars?: Record<string, string | number>,
) => string;

function interpolate(text: string, vars?: Record<string, string | number>): string {
  if (!vars) return text;
  return text.replace(/\{(\w+)\}/g, (whole, name: string) => (name in vars ? String(vars[name]) : whole));
}

/** `t('key', {name})` in the current language; `{name}` in a message is replaced. */
export function useT<M extends Messages>(set: MessageSet<M>): Translate<M> {
  const { locale } = useLocale();
  return useCallback(
    (key, vars) => interpolate((set[locale] as Messages)[key] ?? set.en[key] ?? key, vars),
    [set, locale],
  );
}

/** Dates and times in the current language. */
export function useFormat() {
  const { locale } = useLocale();
  return useMemo(() => {
    const tag = locale === 'de' ? 'de-DE' : 'en-GB';
    const dateTime = new Intl.DateTimeFormat(tag, { dateStyle: 'medium', timeStyle: 'short' });
    const date = new Intl.DateTimeFormat(tag, { dateStyle: 'medium' });
    const number = new Intl.NumberFormat(tag);
    return {
      dateTime: (value: string | null | undefined) => (value ? dateTime.format(new Date(value)) : ''),
      date: (value: string | null | undefined) => (value ? date.format(new Date(value)) : ''),
      number: (value: number) => number.format(value),
      money: (cents: number, currency: string) =>
        new Intl.NumberFormat(tag, { style: 'currency', currency }).format(cents / 100),
    };
  }, [locale]);
}
