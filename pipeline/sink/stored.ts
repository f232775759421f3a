import type { Ch } from '../../clickhouse/client.js';
import type { OffsetRange } from '../../clickhouse/queries/events.js';
import { tsBounds, type Item } from './pending.js';
import type { RecentIds } from './recent-ids.js';
import { eventTime, type SinkRow, type SinkTarget } from './target.js';

/**
 * The exactly-once look-up: marks done the items whose exact Kafka position (partition, offset,
 * index in the message) is already in the table, and returns how many. Exact positions, not "at
 * or below the highest stored offset": a failed insert may have stored some parts and not others.
 */
export async function markStored<R extends SinkRow>(target: SinkTarget<R>, ch: Ch, topic: string, items: Item<R>[]): Promise<number> {
  if (items.length === 0) return 0;
  const stored = await target.storedOffsets(ch, { topic, ranges: offsetRanges(items), ...tsBounds(items) });
  if (stored.size === 0) return 0;
  let found = 0;
  for (const i of items) {
    if (stored.has(`${i.partition}:${i.offset}:${i.index}`)) {
      i.done = true;
      found++;
    }
  }
  return found;
}

/** Per partition, the lowest and highest offset of the items (a message's elements share its offset: parsed once). */
export function offsetRanges(items: readonly Item<unknown>[]): OffsetRange[] {
  const ranges = new Map<number, OffsetRange>();
  let last: { partition: number; offset: string } | undefined;
  for (const i of items) {
    if (last && last.partition === i.partition && last.offset === i.offset) continue;
    last = i;
    const offset = BigInt(i.offset);
    const r = ranges.get(i.partition);
    if (!r) ranges.set(i.partition, { partition: i.partition, fromOffset: offset, toOffset: offset });
    else if (offset < r.fromOffset) r.fromOffset = offset;
    else if (offset > r.toOffset) r.toOffset = offset;
  }
  return [...ranges.values()];
}

/** What `markRedeliveries` did: re-deliveries marked, and how the candidates were answered. */
export interface RedeliveryChecks {
  duplicates: number;
  lookedUp: number;
  knownNew: number;
}

/**
 * Marks done the re-deliveries: items whose `redeliveryId` is already stored or earlier in `items`
 * (in order). Ids `recent` knows to be new are not looked up.
 */
export async function markRedeliveries<R extends SinkRow>(
  target: SinkTarget<R>,
  ch: Ch,
  items: Item<R>[],
  recent: RecentIds,
): Promise<RedeliveryChecks> {
  if (!target.redeliveryId || !target.storedIds || items.length === 0) return { duplicates: 0, lookedUp: 0, knownNew: 0 };
  const candidates: Array<{ item: Item<R>; id: string }> = [];
  const lookUp: R[] = [];
  recent.sweep();
  for (const item of items) {
    const id = target.redeliveryId(item.row!);
    if (id === undefined) continue;
    candidates.push({ item, id });
    if (!recent.knownNew(item.partition, id, eventTime(item.row!))) lookUp.push(item.row!);
  }
  const seen = lookUp.length > 0 ? await target.storedIds(ch, lookUp) : new Set<string>();
  let duplicates = 0;
  for (const { item, id } of candidates) {
    if (seen.has(id)) {
      item.done = true;
      duplicates++;
    } else seen.add(id);
  }
  return { duplicates, lookedUp: lookUp.length, knownNew: candidates.length - lookUp.length };
}

/** Remembers the ids of rows just stored, for `markRedeliveries`. */
export function rememberStored<R extends SinkRow>(target: SinkTarget<R>, recent: RecentIds, items: Item<R>[]): void {
  if (!target.redeliveryId) return;
  for (const item of items) {
    const id = target.redeliveryId(item.row!);
    if (id !== undefined) recent.add(item.partition, id, eventTime(item.row!));
  }
}
