import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENGINE_DIRS } from '../../scripts/stack/common.mjs';

// How the stack runs ClickHouse for what bench:ingest measured (docs/local-stack.md; benchmarks/README.md,
// "ClickHouse's allocator" and "The bench's own dropped database").
const pid = Number(fs.readFileSync(path.join(ENGINE_DIRS.clickhouse, 'clickhouse-server.pid'), 'utf8').trim());

describe('the local ClickHouse server', () => {
  it('runs with jemalloc serving large allocations from its usual arenas (MALLOC_CONF=oversize_threshold:0)', () => {
    const environ = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    expect(environ).toContain('MALLOC_CONF=oversize_threshold:0');
  });

  it('keeps its databases under a directory ext4 spreads new directories from (chattr +T)', () => {
    const dir = path.join(ENGINE_DIRS.clickhouse, 'data', 'data');
    const listed = spawnSync('lsattr', ['-d', dir], { encoding: 'utf8' });
    // Only ext4 (and its kin) have the flag: elsewhere lsattr refuses the directory, and the stack sets nothing.
    if (listed.status !== 0) return;
    expect(listed.stdout.split(/\s+/)[0]).toContain('T');
  });
});
