import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { mapLarge } from '../../../lib/arrays.js';

/**
 * A caller's optimized code deoptimized with "out of bounds" each time it maps an array over
 * 16,382 elements, in the process that runs it: the sink's insert of a large batch, timed by V8's
 * own trace (a fresh process, `--trace-deopt`).
 */
function outOfBoundsDeopts(map: string): number {
  const script = `
    const mapLarge = ${mapLarge.toString()};
    const insert = async (chunk) => (${map}).length;
    (async () => {
      const rows = (n) => Array.from({ length: n }, (_, k) => ({ row: k }));
      const small = rows(5_000), large = rows(20_000);
      for (let round = 0; round < 10; round++) {
        for (let i = 0; i < 5_000; i++) await insert(small);
        await insert(large);
      }
    })();`;
  const trace = execFileSync(process.execPath, ['--trace-deopt', '-e', script], { encoding: 'utf8' });
  return trace.split('\n').filter((l) => l.includes('reason: out of bounds')).length;
}

describe('mapLarge', () => {
  it('maps like Array.prototype.map, in order, at any length', () => {
    for (const n of [0, 1, 16_382, 16_383, 40_000]) {
      const items = Array.from({ length: n }, (_, i) => ({ row: i * 2 }));
      expect(mapLarge(items, (i) => i.row)).toEqual(items.map((i) => i.row));
    }
  });

  it('keeps its caller optimized when arrays over 16,382 elements come between small ones', () => {
    // The reason it exists: the same caller with Array.prototype.map is thrown away on each large array.
    expect(outOfBoundsDeopts('chunk.map((i) => i.row)')).toBeGreaterThanOrEqual(2);
    expect(outOfBoundsDeopts('mapLarge(chunk, (i) => i.row)')).toBe(0);
  });
});
