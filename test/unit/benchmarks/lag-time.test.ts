import { describe, expect, it } from 'vitest';
import { secondsBehind } from '../../../benchmarks/lib/lag-time.js';

const heads = (...list: Array<[number, Record<number, number>]>) => list.map(([at, ends]) => ({ at, ends: offsets(ends) }));
/** Offsets by partition. */
const offsets = (byPartition: Record<number, number>) => new Map(Object.entries(byPartition).map(([p, o]) => [Number(p), o]));

describe('a group’s time behind the head of its topic', () => {
  const seen = heads([1000, { 0: 10, 1: 5 }], [1500, { 0: 20, 1: 5 }], [2000, { 0: 30, 1: 9 }]);

  it('is 0 once it committed every partition’s head', () => {
    expect(secondsBehind(seen, offsets({ 0: 30, 1: 9 }), 2000)).toBe(0);
  });

  it('dates the first message not committed to the look-up before the one that first saw it, on its worst partition', () => {
    // Partition 0's offset 15 first showed at 1500, so it arrived after 1000; partition 1's offset 5 after 1500.
    expect(secondsBehind(seen, offsets({ 0: 15, 1: 9 }), 2200)).toBeCloseTo(1.2);
    expect(secondsBehind(seen, offsets({ 0: 30, 1: 5 }), 2200)).toBeCloseTo(0.7);
    expect(secondsBehind(seen, offsets({ 0: 15, 1: 5 }), 2200)).toBeCloseTo(1.2);
  });

  it('counts from the oldest look-up kept when even that one was past the group, and a partition never committed from offset 0', () => {
    expect(secondsBehind(seen, offsets({ 0: 2 }), 2500)).toBeCloseTo(1.5);
  });
});
