import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds the web console when console/dist is older than its sources (quick when current).
    // Also migrates one embedded database whose dump every embedded test database starts from.
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // A worker runs file after file in one process: the service's modules are imported once a
    // worker, not once a file (docs/decisions.md, "Test suite's time"). No test changes
    // process-wide state (environment, timers, global dispatcher, mocks); each builds its own app.
    isolate: false,
    // Each file opens its own databases (an embedded one holds a few hundred MB).
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // expect.poll waits as long as a browser tab's actions (5 s): its default of one second is
    // shorter than a page's fetch takes while the two cores run both workers' databases.
    expect: { poll: { timeout: 5_000 } },
  },
});
