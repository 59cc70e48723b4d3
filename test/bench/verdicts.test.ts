import { describe, expect, it } from 'vitest';
import type { Measured } from '../../bench/scenarios.ts';
import {
  type LatencyPair,
  pct,
  pct1,
  type TargetResult,
  targetsOf,
  times,
  type VerdictInput,
} from '../../bench/verdicts.ts';

const MB = 2 ** 20;

function measured(
  scenario: string,
  requestsPerSecond: number,
  p99 = 10,
  rowsPerSecond = requestsPerSecond,
): Measured {
  return {
    scenario,
    connections: 50,
    requestsPerSecond,
    rowsPerSecond,
    p50: 5,
    p99,
    errors: 0,
    timeouts: 0,
    non2xx: 0,
    statusCodes: { '201': requestsPerSecond * 10 },
    requests: requestsPerSecond * 10,
    seconds: 10,
    peakRssBytes: 150 * MB,
    serverCpuMs: 1_000,
    databaseCpuMs: 1_000,
    startedAt: '2026-11-29T00:00:00.000Z',
    walBytes: null,
  };
}

function round(serviceRps: number, serviceP99 = 10, baselineRps = 10_000, baselineP99 = 10): LatencyPair {
  return { baselineRps, serviceRps, baselineP99, serviceP99, baselineWalKb: null, serviceWalKb: null };
}

/** A run whose every target is met by a clear margin; each test changes what it judges. */
function run(changes: Partial<VerdictInput> = {}): VerdictInput {
  return {
    database: 'postgres',
    baseline: {
      single: measured('baseline.single', 10_000),
      bulk: measured('baseline.bulk100', 500, 20, 50_000),
      read: measured('baseline.read', 12_000),
    },
    bulkFloor: { rowsPerSecond: 30_000 },
    service: [
      measured('intake.single', 9_500),
      measured('records.get', 11_000),
      measured('notes.by_email', 8_000),
      measured('intake.idempotent', 7_000),
      measured('intake.bulk100', 270, 30, 27_000),
    ],
    latencyPairs: [round(9_500), round(9_600), round(9_400), round(9_700)],
    growth: null,
    webhookRounds: [],
    servicePeakRssBytes: 180 * MB,
    ...changes,
  };
}

function verdictOf(targets: TargetResult[], startOfTarget: string): TargetResult {
  const found = targets.filter((target) => target.target.startsWith(startOfTarget));
  expect(found).toHaveLength(1);
  return found[0]!;
}

describe('the bench verdicts', () => {
  it('meets every target of a run that clears them all', () => {
    const targets = targetsOf(run());
    expect(targets.map((target) => target.verdict)).not.toContain('missed');
    expect(verdictOf(targets, "bulk against the baseline's").verdict).toBe('reported');
  });

  it('judges single-record intake in every round: the worst round decides', () => {
    const rate = (pairs: LatencyPair[]) =>
      verdictOf(targetsOf(run({ latencyPairs: pairs })), 'single-record intake ≥ 85%');
    expect(rate([round(9_000), round(8_500), round(9_900), round(9_900)]).verdict).toBe('met');
    const missed = rate([round(9_900), round(9_900), round(8_499), round(9_900)]);
    expect(missed.verdict).toBe('missed');
    // Rounded down: a round that missed 85% never reads "85.0%".
    expect(missed.value).toContain('lowest 84.9%');
    expect(missed.value).toContain('rounds: 99.0%, 99.0%, 84.9%, 99.0%');

    const tail = (pairs: LatencyPair[]) =>
      verdictOf(targetsOf(run({ latencyPairs: pairs })), 'single-record intake p99 ≤ 1.5×');
    expect(tail([round(9_500, 15), round(9_500, 12)]).verdict).toBe('met');
    const slow = tail([round(9_500, 12), round(9_500, 15.3), round(9_500, 9)]);
    expect(slow.verdict).toBe('missed');
    // Two decimals, so that a missed 1.53 is never shown as "1.5×".
    expect(slow.value).toContain('highest 1.53×');
    // Rounded up: a p99 just past 1.5× never reads "1.5×".
    expect(tail([round(9_500, 15.01)]).value).toBe('highest 1.51×');
    expect(tail([round(9_500, 15)]).value).toBe('highest 1.5×');
  });

  it('shows shares rounded down and latency ratios rounded up, whole numbers as they are', () => {
    expect([pct(0.85), pct1(0.85), pct1(0.8499), pct(0.7499), pct1(0.7), pct1(0.29)]).toEqual([
      '85%',
      '85.0%',
      '84.9%',
      '74%',
      '70.0%',
      '29.0%',
    ]);
    expect([times(1.5), times(1.501), times(0.87), times(12 / 8)]).toEqual([
      '1.5×',
      '1.51×',
      '0.87×',
      '1.5×',
    ]);
  });

  it('judges reads and notes at 70% of their baselines with a p99 of at most 1.5×', () => {
    const reads = (rps: number, p99: number) =>
      targetsOf(run({ service: [measured('intake.single', 9_500), measured('records.get', rps, p99)] }));
    expect(verdictOf(reads(8_400, 15), 'record reads ≥ 70%').verdict).toBe('met');
    expect(verdictOf(reads(8_399, 15), 'record reads ≥ 70%').verdict).toBe('missed');
    expect(verdictOf(reads(8_400, 15), 'record reads p99').verdict).toBe('met');
    expect(verdictOf(reads(8_400, 15.1), 'record reads p99').verdict).toBe('missed');

    const notes = (rps: number) =>
      verdictOf(
        targetsOf(run({ service: [measured('intake.single', 9_500), measured('notes.by_email', rps)] })),
        'notes by email ≥ 70%',
      );
    expect(notes(7_000).verdict).toBe('met');
    expect(notes(6_990).verdict).toBe('missed');
  });

  it('judges idempotent intake at 60% of the insert baseline', () => {
    const idempotent = (rps: number) =>
      verdictOf(targetsOf(run({ service: [measured('intake.idempotent', rps)] })), 'idempotent intake');
    expect(idempotent(6_000).verdict).toBe('met');
    expect(idempotent(5_990).verdict).toBe('missed');
  });

  it("judges bulk against its storage floor, and reports the multi-row baseline's ratio beside it", () => {
    const bulk = (rowsPerSecond: number, floor: VerdictInput['bulkFloor']) =>
      targetsOf(run({ service: [measured('intake.bulk100', 250, 30, rowsPerSecond)], bulkFloor: floor }));
    expect(verdictOf(bulk(22_500, { rowsPerSecond: 30_000 }), 'bulk ≥ 75%').verdict).toBe('met');
    const missed = verdictOf(bulk(22_490, { rowsPerSecond: 30_000 }), 'bulk ≥ 75%');
    expect(missed.verdict).toBe('missed');
    expect(missed.value).toBe('74.9% (22490 against 30000 rows/s)');
    // Without a floor measured, the baseline's ratio is what is judged.
    const noFloor = bulk(22_500, null);
    expect(noFloor.some((target) => target.target.startsWith('bulk ≥ 75%'))).toBe(false);
    expect(verdictOf(noFloor, "bulk against the baseline's").verdict).toBe('missed');
  });

  it('judges the webhook pairs by their median', () => {
    const pair = (ratio: number) => ({
      plain: measured('intake.single', 10_000),
      subscribed: measured('intake.webhook', 10_000 * ratio),
    });
    const webhook = (ratios: number[]) =>
      verdictOf(targetsOf(run({ webhookRounds: ratios.map(pair) })), 'intake with one webhook');
    expect(webhook([0.6, 0.8, 0.95]).verdict).toBe('met');
    const missed = webhook([0.79, 0.95, 0.7]);
    expect(missed.verdict).toBe('missed');
    expect(missed.value).toContain('79.0% (median of 3 back-to-back pairs');
  });

  it('judges growth by the median of its pairs, and calls a smaller table indicative', () => {
    const growth = (rows: number, ratios: number[]): VerdictInput['growth'] => ({
      rows,
      seedSeconds: 60,
      baselineSingle: measured('baseline.single', 10_000),
      pairs: ratios.map((ratio) => ({
        scenario: 'intake.single' as const,
        empty: measured('intake.single', 9_000),
        grown: measured('intake.single', 9_000 * ratio),
      })),
    });
    const verdict = (rows: number, ratios: number[]) =>
      verdictOf(targetsOf(run({ growth: growth(rows, ratios) })), 'intake.single with 1,000,000 records')
        .verdict;
    expect(verdict(1_000_000, [0.85, 0.9, 1.1])).toBe('met');
    expect(verdict(1_000_000, [0.95, 0.89, 0.8])).toBe('missed');
    expect(verdict(10_000, [1, 1, 1])).toBe('met (indicative: 10,000 records, not 1,000,000)');
  });

  it('holds peak RSS to 200 MB on PostgreSQL and 450 MB on the embedded database', () => {
    const rss = (database: VerdictInput['database'], megabytes: number) =>
      verdictOf(targetsOf(run({ database, servicePeakRssBytes: megabytes * MB })), 'peak server RSS');
    expect(rss('postgres', 200).verdict).toBe('met');
    expect(rss('postgres', 201).verdict).toBe('missed');
    expect(rss('pglite', 450).verdict).toBe('met');
    expect(rss('pglite', 451)).toEqual({
      database: 'pglite',
      target: 'peak server RSS ≤ 450 MB',
      value: '451 MB',
      verdict: 'missed',
    });
  });
});
