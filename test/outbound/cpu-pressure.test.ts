import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCpuPressureGauge } from '../../src/outbound/cpu-pressure.ts';
import { runProgram } from '../helpers/child-program.ts';

const psi = (someTotal: number) =>
  `some avg10=0.00 avg60=0.00 avg300=0.00 total=${someTotal}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n`;

describe('the CPU pressure gauge', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'leads-psi-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  describe('happy path', () => {
    it('answers the share of time some task waited for a CPU since its last sample', async () => {
      const file = path.join(dir, 'cpu');
      await writeFile(file, psi(1_000_000));
      const gauge = createCpuPressureGauge(file, 50)!;
      expect(gauge.current()).toBe(0);
      const from = performance.now();
      await new Promise((resolve) => setTimeout(resolve, 100));
      // 80 ms of stall (in microseconds) over the ≥ 100 ms since the first reading.
      await writeFile(file, psi(1_080_000));
      const elapsed = performance.now() - from;
      const share = gauge.current();
      expect(share).toBeGreaterThan(0.5);
      expect(share).toBeLessThanOrEqual(80 / elapsed + 0.01);
      // Within the interval the last share is answered without reading again.
      await writeFile(file, psi(9_000_000));
      expect(gauge.current()).toBe(share);
    });

    it('answers the share of the last interval the event loop was busy', async () => {
      // In a process of its own: the test runner's worker runs other files' leftover work too.
      const printed = await runProgram(`
const { createEventLoopGauge } = await import(root + 'src/outbound/cpu-pressure.ts');
const gauge = createEventLoopGauge(50);
await new Promise((resolve) => setTimeout(resolve, 60));
// Busy for about 80 ms of the interval: the loop blocked on purpose.
const busyUntil = performance.now() + 80;
while (performance.now() < busyUntil) {}
const busy = gauge.current();
await new Promise((resolve) => setTimeout(resolve, 200));
console.log(JSON.stringify({ busy, idle: gauge.current() }));
`);
      const { busy, idle } = JSON.parse(printed) as { busy: number; idle: number };
      expect(busy).toBeGreaterThan(0.4);
      expect(idle).toBeLessThan(0.5);
    });

    it('reads this machine where it has pressure information', () => {
      const gauge = createCpuPressureGauge();
      if (!gauge) return; // not Linux with PSI: the dispatcher uses its fixed pace
      const share = gauge.current();
      expect(share).toBeGreaterThanOrEqual(0);
      expect(share).toBeLessThanOrEqual(1);
    });
  });

  describe('errors', () => {
    it('is absent where the file is missing or holds no stall total', async () => {
      expect(createCpuPressureGauge(path.join(dir, 'missing'))).toBeNull();
      const odd = path.join(dir, 'odd');
      await writeFile(odd, 'nothing here\n');
      expect(createCpuPressureGauge(odd)).toBeNull();
    });
  });
});
