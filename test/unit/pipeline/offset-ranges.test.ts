import { describe, expect, it } from 'vitest';
import type { Item } from '../../../pipeline/sink/pending.js';
import { offsetRanges } from '../../../pipeline/sink/stored.js';

const item = (partition: number, offset: number, index = 0): Item<unknown> => ({ partition, offset: String(offset), index, done: false });

describe("the sink's look-up of stored positions", () => {
  it('asks each partition for its own offsets only, however far apart the partitions are', () => {
    const items = [item(0, 5000), item(0, 5000, 1), item(3, 12), item(0, 5001), item(3, 14), item(3, 13), item(0, 4998)];
    expect(offsetRanges(items)).toEqual([
      { partition: 0, fromOffset: 4998n, toOffset: 5001n },
      { partition: 3, fromOffset: 12n, toOffset: 14n },
    ]);
  });

  it('reads offsets past 2^53 exactly', () => {
    const big = '9007199254740993';
    expect(offsetRanges([{ ...item(1, 0), offset: big }])).toEqual([{ partition: 1, fromOffset: BigInt(big), toOffset: BigInt(big) }]);
  });
});
