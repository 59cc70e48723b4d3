import { createRequire } from 'node:module';

/**
 * Countries of partner addresses (decisions §8): a two-letter code in any case, or a name in any
 * language `i18n-iso-countries` offers (English and German first), stored as the upper-case
 * two-letter code. Three-letter codes are refused, even where a language lists one as a name
 * (`USA`), and so is a name that two countries share (`Congo`).
 */

type CountriesLibrary = typeof import('i18n-iso-countries');

/** Languages whose names win over those of other languages when they disagree. */
const PREFERRED_LANGUAGES = ['en', 'de'];

interface Lookup {
  library: CountriesLibrary;
  names: Map<string, string>;
  ambiguous: Set<string>;
}

let lookup: Lookup | undefined;

/** Lower case, Latin accents dropped (`Österreich` = `osterreich`), spaces collapsed. */
function normalize(name: string): string {
  return name
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * Built on first use: the library registers all its languages when loaded (about 12,000 names),
 * which a service that never resolves a country name need not pay for.
 */
function load(): Lookup {
  if (lookup) return lookup;
  const library = createRequire(import.meta.url)('i18n-iso-countries') as CountriesLibrary;
  const names = new Map<string, string>();
  const ambiguous = new Set<string>();
  // Tiers: English and German together, then every other language on its own. A name is taken
  // from the first tier that has it; one name of two countries within a tier is ambiguous.
  const tiers = [
    PREFERRED_LANGUAGES,
    ...library
      .getSupportedLanguages()
      .filter((lang) => !PREFERRED_LANGUAGES.includes(lang))
      .map((lang) => [lang]),
  ];
  for (const tier of tiers) {
    const added = new Map<string, string>();
    for (const lang of tier) {
      for (const [code, spelled] of Object.entries(library.getNames(lang, { select: 'all' }))) {
        for (const name of spelled) {
          const key = normalize(name);
          if (key === '' || names.has(key) || ambiguous.has(key)) continue;
          const earlier = added.get(key);
          if (earlier !== undefined && earlier !== code) ambiguous.add(key);
          else added.set(key, code);
        }
      }
    }
    for (const [key, code] of added) if (!ambiguous.has(key)) names.set(key, code);
  }
  lookup = { library, names, ambiguous };
  return lookup;
}

/** The upper-case two-letter code of a code or a country name, or undefined when unknown. */
export function resolveCountry(input: string): string | undefined {
  const text = input.trim();
  const { library, names } = load();
  if (/^[A-Za-z]{2}$/.test(text)) {
    const code = text.toUpperCase();
    if (library.isValid(code)) return code;
  }
  // Codes are two letters (decisions §8: "anything else → invalid_country").
  if (/^[A-Za-z]{3}$/.test(text) && library.alpha3ToAlpha2(text.toUpperCase())) return undefined;
  return names.get(normalize(text));
}
