import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default'],
    // Files share their worker's loaded modules (vitest 3 takes `isolate` only at the root). e2e:
    // importing kafkajs, pg, koa, the MCP SDK and our code again for each of ~95 files took ~70 s.
    // unit: 6 s instead of 45 s. No test mocks modules or changes process.env; each e2e suite
    // starts and closes its own api, edge or pipeline.
    isolate: false,
    projects: [
      {
        // Pure code, no engines and no global setup: runs in seconds on a bare machine.
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // Only against a hang: on a loaded 2-core machine a property test's 5,000 runs can pass 5 s.
          testTimeout: 30_000,
          pool: 'threads',
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/**/*.test.ts'],
          exclude: ['test/unit/**', '**/node_modules/**'],
          globalSetup: ['test/support/global-setup.ts'],
          // One file at a time: the suites share one real stack on a 2-core machine.
          // (`fileParallelism` is a whole-run option in vitest 3, so a single fork does it per project.)
          poolOptions: { forks: { singleFork: true } },
          testTimeout: 60_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
