import type { Batch } from 'kafkajs';
import type { Letter } from './dead-letter.js';
import type { SinkRow } from './target.js';

/**
 * An INSERT of fewer rows than max_insert_block_size (1,048,576 by default on every version) is
 * one block. A block spanning many partitions is written as one part per partition, and current
 * ClickHouse refuses more than 100 partitions per block (each view's target counts too; the daily
 * rollup's local days can double the raw table's days), hence at most 50 raw partitions per insert.
 */
export const MAX_INSERT_ROWS = 1_000_000;
const MAX_PARTITIONS_PER_INSERT = 50;

/** One message element held by the sink: its Kafka position and either its row or its dead letter. */
export interface Item<R> {
  partition: number;
  offset: string;
  /** Place in its message. */
  index: number;
  row?: R;
  poison?: { letter: Letter; error: string };
  /** Inserted, found stored, or dead-lettered: a retry leaves it alone. */
  done: boolean;
}

/** The batch being accumulated across partitions and fetches, written and committed as one. */
export class Pending<R> {
  readonly items: Item<R>[] = [];
  rows = 0;
  firstAt = 0;
  /** Per partition: the offset to commit once written, and the first offset held (where a rewind restarts). */
  readonly commit = new Map<number, string>();
  readonly from = new Map<number, string>();
  written?: Promise<void>;
  constructor(readonly epoch: number) {}

  /** Adds a fetched batch's items; its partition is committed past the batch once written. */
  hold(batch: Batch, items: Item<R>[]): void {
    if (this.items.length === 0) this.firstAt = Date.now();
    for (const item of items) {
      this.items.push(item);
      if (item.row) this.rows++;
    }
    if (!this.from.has(batch.partition)) this.from.set(batch.partition, batch.firstOffset()!);
    this.commit.set(batch.partition, (BigInt(batch.lastOffset()) + 1n).toString());
  }
}

/** The event-time bounds (epoch seconds) of the items' rows: a replayed row keeps its event time, so they prune lookups. */
export function tsBounds<R extends SinkRow>(items: Item<R>[]): { fromTs: number; toTs: number } {
  let fromTs = Infinity;
  let toTs = 0;
  for (const i of items) {
    fromTs = Math.min(fromTs, i.row!.ts);
    toTs = Math.max(toTs, i.row!.ts);
  }
  return { fromTs, toTs };
}

/** Consecutive runs of at most `maxRows` items touching at most MAX_PARTITIONS_PER_INSERT raw partitions. */
export function chunks<R extends SinkRow>(items: Item<R>[], maxRows: number, partitionKey: (row: R) => string): Item<R>[][] {
  const out: Item<R>[][] = [];
  let chunk: Item<R>[] = [];
  let keys = new Set<string>();
  for (const item of items) {
    const key = partitionKey(item.row!);
    if (chunk.length >= maxRows || (!keys.has(key) && keys.size >= MAX_PARTITIONS_PER_INSERT)) {
      out.push(chunk);
      chunk = [];
      keys = new Set();
    }
    chunk.push(item);
    keys.add(key);
  }
  if (chunk.length > 0) out.push(chunk);
  return out;
}
