import type { Ch } from '../../clickhouse/client.js';
import type { Item } from './pending.js';
import { RecentIds, type RecentIdsOptions } from './recent-ids.js';
import { markRedeliveries, markStored, rememberStored } from './stored.js';
import type { SinkRow, SinkStats, SinkTarget } from './target.js';

/**
 * What a sink knows of the partitions it writes (docs/pipeline.md#offsets-replays-and-the-exactly-once-effect):
 * which ones nobody else wrote since it last looked, so their positions need no look-up, and the
 * ids it stored lately, so live traffic needs no re-delivery look-up (recent-ids.ts).
 */
export class Ownership<R extends SinkRow> {
  private readonly verified = new Set<number>();
  /**
   * Per partition not yet verified, the high watermark of its first batch since: whoever wrote it
   * before fetched only below that, so positions are looked up until the sink committed past it.
   */
  private readonly verifyUntil = new Map<number, bigint>();
  private readonly recent: RecentIds;

  constructor(
    private readonly target: SinkTarget<R>,
    private readonly ch: Ch,
    private readonly topic: string,
    private readonly stats: SinkStats,
    recentIds?: RecentIdsOptions,
  ) {
    this.recent = new RecentIds(recentIds);
  }

  /** A batch of the partition was fetched. */
  fetched(partition: number, highWatermark: string): void {
    if (!this.verified.has(partition) && !this.verifyUntil.has(partition)) this.verifyUntil.set(partition, BigInt(highWatermark));
  }

  /** Marks done the items already stored (at their position, or as an earlier delivery of their id); returns the others. */
  async unstored(items: Item<R>[]): Promise<Item<R>[]> {
    let todo = items;
    const unverified = todo.filter((i) => !this.verified.has(i.partition));
    if (unverified.length > 0) {
      const lookedAt = Date.now();
      this.stats.skipped += await markStored(this.target, this.ch, this.topic, unverified);
      for (const i of unverified) this.recent.own(i.partition, lookedAt);
      rememberStored(
        this.target,
        this.recent,
        unverified.filter((i) => i.done),
      );
      todo = todo.filter((i) => !i.done);
    }
    const checks = await markRedeliveries(this.target, this.ch, todo, this.recent);
    this.stats.duplicates += checks.duplicates;
    this.stats.idsLookedUp += checks.lookedUp;
    this.stats.idsKnownNew += checks.knownNew;
    return todo.filter((i) => !i.done);
  }

  inserted(items: Item<R>[]): void {
    rememberStored(this.target, this.recent, items);
  }

  /** An insert of these items failed, and may still have stored some or all of them: look again before the next attempt. */
  failed(items: Item<R>[]): void {
    for (const partition of new Set(items.map((i) => i.partition))) {
      this.verified.delete(partition);
      this.recent.forget(partition);
    }
  }

  /** The partition is committed up to `next`: verified once that is past every position another writer could have stored. */
  committed(partition: number, next: bigint): void {
    if (next < (this.verifyUntil.get(partition) ?? 0n)) return;
    this.verifyUntil.delete(partition);
    this.verified.add(partition);
  }

  /** Held work was dropped (a rebalance, a lost session): every partition may have been written by another. */
  reset(): void {
    this.verified.clear();
    this.verifyUntil.clear();
    this.recent.clear();
  }
}
