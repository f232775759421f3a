import { defineConfig } from 'vitest/config';

/**
 * e2e files that run alone, after the others: they drop or rewrite data of every tenant (retention,
 * compaction, schema upgrades), drive the stack script, or measure timing that a second file on
 * the 2 cores would skew (pings, start-up within a deadline, kill -9 recovery, load).
 */
const SERIAL = [
  'test/pipeline/retention.test.ts',
  'test/pipeline/compaction.test.ts',
  'test/pipeline/schema-upgrades.test.ts',
  'test/pipeline/view-repair.test.ts',
  'test/foundation/migrations.test.ts',
  'test/derive/upgrade.test.ts',
  'test/foundation/stack-*.test.ts',
  'test/foundation/startup-logs.test.ts',
  'test/reliability/chaos-short.test.ts',
  'test/derive/backfill-under-load.test.ts',
  'test/edge/limits.test.ts',
  'test/edge/process.test.ts',
  'test/processors/crash.test.ts',
  'test/foundation/kafka-cluster.test.ts',
];

const e2e = {
  include: ['test/**/*.test.ts'],
  globalSetup: ['test/support/global-setup.ts'],
  testTimeout: 60_000,
  hookTimeout: 180_000,
};

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
          ...e2e,
          name: 'e2e',
          exclude: ['test/unit/**', ...SERIAL, '**/node_modules/**'],
          setupFiles: ['test/support/worker-env.ts'],
          // Three files at a time (the worker count is in scripts/test.mjs; vitest 3 takes it only for a
          // whole run): most of an e2e file's time is waiting. Each worker has its own Postgres
          // database, topics and Redis keys (worker-env.ts).
        },
      },
      {
        test: {
          ...e2e,
          name: 'e2e-serial',
          include: SERIAL,
          // One file at a time, alone on the machine (see SERIAL).
          poolOptions: { forks: { singleFork: true } },
        },
      },
    ],
  },
});
