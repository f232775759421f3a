import type { Ch } from '../clickhouse/client.js';
import { optimizePartition, splitPartitions, type CompactedTable } from '../clickhouse/queries/retention.js';
import type { Logger } from '../lib/logger.js';
import { isExpired, parsePartitionId, partitionEnd } from './retention.js';

const HOUR_MS = 3_600_000;
/** Each compaction rewrites a partition whole, on the host the sinks write to: a run does at most this many. */
export const MAX_COMPACTIONS_PER_RUN = 50;

/**
 * Closed: its day or month ended an hour ago, so the sinks' writes for it have landed. A late event
 * (ingest takes events as old as the retention window) adds a part again; a later run merges it.
 */
export function isClosed(table: CompactedTable, partitionId: string, now: number): boolean {
  const p = partitionEnd(table, partitionId);
  return p !== undefined && p.endMs + HOUR_MS <= now;
}

export interface Compaction {
  table: CompactedTable;
  partitionId: string;
  /** Parts merged into one. */
  parts: number;
}

/**
 * Merges each closed partition of the telemetry rollups that holds more than one part into one,
 * newest first (the most queried), at most `limit` a run. A query reads at least a granule of
 * every part it touches, and ClickHouse's background merges leave a partition in several parts
 * once its writes stop, so an unmerged partition costs every query more
 * (docs/telemetry.md#compaction). Merging an AggregatingMergeTree's parts changes no answer. A
 * partition that cannot be merged now is logged and left for the next run; `signal` stops the run,
 * without waiting for the merge in hand (shutdown).
 */
export async function compactClosedPartitions(
  ch: Ch,
  log: Logger,
  { now = Date.now(), limit = MAX_COMPACTIONS_PER_RUN, signal }: { now?: number; limit?: number; signal?: AbortSignal } = {},
): Promise<Compaction[]> {
  const closed = (await splitPartitions(ch)).filter(
    (p) => isClosed(p.table, p.partition_id, now) && !isExpired(p.table, p.partition_id, now),
  );
  closed.sort((a, b) => parsePartitionId(b.partition_id)!.endMs - parsePartitionId(a.partition_id)!.endMs);
  const done: Compaction[] = [];
  for (const { table, partition_id: partitionId, parts } of closed.slice(0, limit)) {
    if (signal?.aborted) break;
    try {
      await optimizePartition(ch, table, partitionId, signal);
      done.push({ table, partitionId, parts });
    } catch (err) {
      if (signal?.aborted) {
        log.info({ table, partitionId }, 'compaction: stopped while merging; the partition is merged on a later run');
        break;
      }
      log.warn({ table, partitionId, err }, 'compaction: partition not merged; retried next run');
    }
  }
  if (done.length > 0) log.info({ compacted: done, left: closed.length - done.length }, 'compaction: merged closed partitions');
  return done;
}
