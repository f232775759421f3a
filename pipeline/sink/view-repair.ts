import type { Ch } from '../../clickhouse/client.js';
import { replicasSettled } from '../../clickhouse/queries/rollup-repair.js';
import { mapLarge } from '../../lib/arrays.js';
import type { Logger } from '../../lib/logger.js';
import type { Item } from './pending.js';
import { markStored } from './stored.js';
import type { SinkRow, SinkStats, SinkTarget } from './target.js';

/** Suspects whose rows are not all visible after this long are given up (counted and logged). */
const GIVE_UP_MS = 15 * 60_000;
const RETRY_MS = 5_000;

export interface ViewRepairOptions<R extends SinkRow> {
  ch: Ch;
  topic: string;
  target: SinkTarget<R>;
  log: Logger;
  stats: SinkStats;
  /** Queues a step on the sink's write chain: a repair never runs beside this sink's own inserts. */
  enqueue(step: () => Promise<void>): void;
}

/**
 * The rows of inserts that failed: ClickHouse may have stored them without their views' rows (a
 * server that died between the raw part and the views' parts; docs/pipeline.md#materialized-views-and-partial-failure).
 * Once every one of them is found stored and the replicas are settled, the target repairs its views
 * for them. Kept in memory: a pipeline that dies before the repair loses it (a warning at shutdown).
 */
export class ViewRepairs<R extends SinkRow> {
  private readonly suspects = new Map<string, Item<R>>();
  private since = 0;
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(private readonly opts: ViewRepairOptions<R>) {}

  /** Suspect rows not repaired yet. */
  get pending(): number {
    return this.suspects.size;
  }

  /** Rows of an insert that failed. */
  note(items: readonly Item<R>[]): void {
    if (!this.opts.target.repairViews) return;
    if (this.suspects.size === 0) this.since = Date.now();
    for (const i of items) {
      if (i.row)
        this.suspects.set(`${i.partition}:${i.offset}:${i.index}`, {
          partition: i.partition,
          offset: i.offset,
          index: i.index,
          row: i.row,
          done: false,
        });
    }
    this.schedule(0);
  }

  /**
   * After a rebalance: rows of partitions another member owns now are its to store, and this sink
   * must not compare a venue that member is writing. Given up, counted.
   */
  keepOnly(partitions: ReadonlySet<number>): void {
    let dropped = 0;
    for (const [key, i] of this.suspects) {
      if (!partitions.has(i.partition)) {
        this.suspects.delete(key);
        dropped++;
      }
    }
    if (dropped > 0) this.abandon(dropped, 'their partitions moved to another member');
  }

  /** At shutdown: a repair not run yet is lost with the process. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.suspects.size > 0) this.abandon(this.suspects.size, 'the sink stopped first');
    this.suspects.clear();
  }

  private abandon(rows: number, why: string): void {
    this.opts.stats.viewRepairsAbandoned += rows;
    this.opts.log.warn(
      { rows, why },
      'view repair given up: the rollups of these rows may stay short (docs/pipeline.md#materialized-views-and-partial-failure)',
    );
  }

  private schedule(delayMs: number): void {
    if (this.timer || this.stopped || this.suspects.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.opts.enqueue(() => this.run());
    }, delayMs);
    this.timer.unref();
  }

  private async run(): Promise<void> {
    if (this.suspects.size === 0 || this.stopped) return;
    const { ch, topic, target, log, stats } = this.opts;
    try {
      const items = [...this.suspects.values()].map((i) => ({ ...i, done: false }));
      const found = await markStored(target, ch, topic, items);
      // Not all visible yet: a replica that holds some is away, or the sink's retry has not stored them.
      if (found < items.length || !(await replicasSettled(ch))) {
        if (Date.now() - this.since > GIVE_UP_MS) {
          this.abandon(this.suspects.size, 'their rows were not all visible in time');
          this.suspects.clear();
        }
        return;
      }
      const repaired = await target.repairViews!(
        ch,
        mapLarge(items, (i) => i.row!),
      );
      stats.viewRepairs++;
      stats.viewRowsToppedUp += repaired.toppedUp;
      if (repaired.excess > 0) log.error({ ...repaired }, 'view rows hold more than their raw rows: not repairable by adding');
      log.info({ rows: items.length, ...repaired }, 'views checked against the raw rows of a failed insert');
      for (const i of items) this.suspects.delete(`${i.partition}:${i.offset}:${i.index}`);
    } catch (err) {
      log.warn({ err }, 'view repair failed; tried again shortly');
    } finally {
      this.schedule(RETRY_MS);
    }
  }
}
