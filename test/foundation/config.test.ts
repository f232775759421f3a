import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

// The checks of the rules themselves are unit tests (test/unit/foundation/config.test.ts); this one
// starts a real entry point, which takes seconds.
describe('a process started with a bad variable', () => {
  it('stops with exit code 1 and one line naming the variable', () => {
    const r = spawnSync(process.execPath, ['node_modules/vite-node/vite-node.mjs', 'apps/pipeline/main.ts'], {
      env: { ...process.env, KAFKA_PARTITIONS: 'many' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('invalid configuration:');
    expect(r.stderr).toMatch(/^\s+KAFKA_PARTITIONS: .+$/m);
  });
});
