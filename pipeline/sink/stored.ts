import type { Ch } from '../../clickhouse/client.js';
import { tsBounds, type Item } from './pending.js';
import type { SinkRow, SinkTarget } from './target.js';

/**
 * The exactly-once look-up: marks done the items whose exact Kafka position (partition, offset,
 * index in the message) is already in the table, and returns how many. Exact positions, not "at
 * or below the highest stored offset": a failed insert may have stored some parts and not others.
 */
export async function markStored<R extends SinkRow>(target: SinkTarget<R>, ch: Ch, topic: string, items: Item<R>[]): Promise<number> {
  if (items.length === 0) return 0;
  const stored = await target.storedOffsets(ch, {
    topic,
    partitions: [...new Set(items.map((i) => i.partition))],
    fromOffset: items.reduce((m, i) => (BigInt(i.offset) < m ? BigInt(i.offset) : m), BigInt(items[0]!.offset)),
    toOffset: items.reduce((m, i) => (BigInt(i.offset) > m ? BigInt(i.offset) : m), 0n),
    ...tsBounds(items),
  });
  let found = 0;
  for (const i of items) {
    if (stored.has(`${i.partition}:${i.offset}:${i.index}`)) {
      i.done = true;
      found++;
    }
  }
  return found;
}

/** Marks done the re-deliveries the target recognises (vendor event ids already stored or earlier in the batch); returns how many. */
export async function markRedeliveries<R extends SinkRow>(target: SinkTarget<R>, ch: Ch, items: Item<R>[]): Promise<number> {
  if (!target.redeliveries || items.length === 0) return 0;
  const again = await target.redeliveries(
    ch,
    items.map((i) => i.row!),
  );
  if (again.size === 0) return 0;
  let found = 0;
  for (const i of items) {
    if (again.has(i.row!)) {
      i.done = true;
      found++;
    }
  }
  return found;
}
