import { readFileSync } from 'node:fs';

/**
 * A share (0–1) of the last interval, sampled at most every `minIntervalMs`: of the machine's
 * CPU pressure or of this process's event-loop utilization (below).
 */
export interface LoadGauge {
  current(): number;
}

/** Reads the cumulative "some" stall time in microseconds, or null where there is none. */
function readStallMicros(path: string): number | null {
  try {
    const match = /^some .*\btotal=(\d+)/m.exec(readFileSync(path, 'utf8'));
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}

/**
 * A gauge that takes a new reading at most every `minIntervalMs` and answers the last share in
 * between: it is asked on every look for due messages while requests write (thousands a
 * second), so within the interval only the clock is read. `read` gets the time since the last
 * reading and answers the share of it, or null to keep the last share and try again next time.
 */
function sampledGauge(minIntervalMs: number, read: (elapsedMs: number) => number | null): LoadGauge {
  let lastAt = performance.now();
  let share = 0;
  return {
    current() {
      const at = performance.now();
      if (at - lastAt < minIntervalMs) return share;
      const next = read(at - lastAt);
      if (next === null) return share;
      share = next;
      lastAt = at;
      return share;
    },
  };
}

/**
 * How contended the machine's CPUs are: the share of wall time in which some runnable task
 * waited for a CPU, from Linux's pressure stall information (`/proc/pressure/cpu`, "some";
 * Linux 4.20+). Null where the file cannot be read (other systems, kernels without PSI):
 * callers then fall back to a rule that needs no gauge.
 */
export function createCpuPressureGauge(path = '/proc/pressure/cpu', minIntervalMs = 100): LoadGauge | null {
  const first = readStallMicros(path);
  if (first === null) return null;
  let lastTotal = first;
  return sampledGauge(minIntervalMs, (elapsedMs) => {
    const total = readStallMicros(path);
    if (total === null) return null;
    const share = Math.min(1, Math.max(0, (total - lastTotal) / 1000 / elapsedMs));
    lastTotal = total;
    return share;
  });
}

/**
 * How busy this process's event loop is: the share of the last interval (at least
 * `minIntervalMs`) it spent running code rather than waiting. With the embedded database its
 * queries run on this thread too, so the process saturates before the machine's CPUs do.
 */
export function createEventLoopGauge(minIntervalMs = 100): LoadGauge {
  let last = performance.eventLoopUtilization();
  return sampledGauge(minIntervalMs, () => {
    const now = performance.eventLoopUtilization();
    const share = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    return share;
  });
}
