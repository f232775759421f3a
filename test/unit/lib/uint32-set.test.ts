import { describe, expect, it } from 'vitest';
import { Uint32Set } from '../../../lib/uint32-set.js';

describe('Uint32Set', () => {
  it('holds every value it was given, across growth and above 2^31, once each', () => {
    const set = new Uint32Set();
    const values = Array.from({ length: 10_000 }, (_, i) => (i * 2_654_435_761) >>> 0 || 1);
    for (const v of values) expect(set.add(v)).toBe(true);
    expect(set.add(values[17]!)).toBe(false);
    expect(set.size).toBe(10_000);
    expect(values.every((v) => set.has(v))).toBe(true);
    expect(values.some((v) => v > 2 ** 31)).toBe(true);
    expect(set.has(4_000_000_001)).toBe(values.includes(4_000_000_001));
  });
});
