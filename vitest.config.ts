import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds the web console when console/dist is older than its sources (quick when current).
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Each file opens its own databases (an embedded one holds a few hundred MB).
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
