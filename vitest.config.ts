import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // One file at a time: the suites share one real stack on a 2-core machine.
    fileParallelism: false,
    // The files share one worker and its loaded modules: importing kafkajs, pg, koa, the MCP SDK
    // and our code again for each of ~75 files took ~70 s of a ~10 minute run (now ~8 s). No suite
    // mocks modules or changes process.env; each starts and closes its own api, edge or pipeline.
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
});
