/**
 * Currencies a participation may be priced in (decisions §8, docs/decisions.md "Distribution
 * setup"): the ISO 4217 codes of currencies in use, without funds (`BOV`, `CLF`, …), precious
 * metals (`XAU`, …), units of account (`XDR`, `XSU`, `XBA`–`XBD`, `XUA`) and the test and
 * no-currency codes (`XTS`, `XXX`); codes withdrawn since 2023 in a changeover stay taken (`ANG`,
 * `BGN`, `CUC`, `HRK`, `SLL`, `ZWL`). A list here rather than `Intl.supportedValuesOf('currency')`,
 * which depends on the runtime's ICU data (Node 24's lacks `VED`).
 */
const CURRENCIES = new Set(
  `AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN
  BZD CAD CDF CHF CLP CNY COP CRC CUC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL
  GHS GIP GMD GNF GTQ GYD HKD HNL HRK HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF
  KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR
  MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG
  SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD
  UYU UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG ZWL`.split(/\s+/),
);

/** Whether the text is the upper-case code of a currency in use. */
export function isCurrency(code: string): boolean {
  return CURRENCIES.has(code);
}
