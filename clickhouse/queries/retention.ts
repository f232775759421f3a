import { chExec, chRows, chsql, raw, type Ch, type ChSql } from '../client.js';

/** Tables partitioned by (retention_days, day or month), and so cleaned by whole partitions. */
export const RETAINED_TABLES = ['events', 'telemetry_1m', 'telemetry_1h', 'telemetry_1d'] as const;
/** The processors' output tables and the tables derived from the raw one, partitioned the same way. */
export const DERIVED_TABLES = [
  'occupancy_updates',
  'connector_health',
  'derived_visits',
  'derived_occupancy',
  'derived_zone_occupancy',
  'derived_visit_state',
] as const;
export type RetainedTable = (typeof RETAINED_TABLES)[number] | (typeof DERIVED_TABLES)[number];

export function activePartitionsSql(): ChSql {
  return chsql`SELECT DISTINCT table, partition_id FROM system.parts
                WHERE database = currentDatabase() AND active AND has(${[...RETAINED_TABLES, ...DERIVED_TABLES]}, table)
                ORDER BY table, partition_id`;
}

export async function activePartitions(ch: Ch): Promise<Array<{ table: RetainedTable; partition_id: string }>> {
  return chRows(ch, activePartitionsSql());
}

/** `DROP PARTITION ID` takes the id string on every version (the tuple form mismatches types on 18.16). */
export function dropPartitionSql(table: RetainedTable, partitionId: string): ChSql {
  return chsql`ALTER TABLE ${raw(table)} DROP PARTITION ID ${partitionId}`;
}

export async function dropPartition(ch: Ch, table: RetainedTable, partitionId: string): Promise<void> {
  await chExec(ch, dropPartitionSql(table, partitionId));
}

/** The rollups telemetry queries read: a query reads at least a granule of every part of every partition it touches. */
export const COMPACTED_TABLES = ['telemetry_1m', 'telemetry_1h', 'telemetry_1d'] as const;
export type CompactedTable = (typeof COMPACTED_TABLES)[number];

/** Partitions of the compacted tables made of more than one active part, with their part count. */
export function splitPartitionsSql(): ChSql {
  return chsql`SELECT table, partition_id, toUInt32(count()) AS parts FROM system.parts
                WHERE database = currentDatabase() AND active AND has(${[...COMPACTED_TABLES]}, table)
                GROUP BY table, partition_id HAVING parts > 1
                ORDER BY table, partition_id`;
}

export async function splitPartitions(ch: Ch): Promise<Array<{ table: CompactedTable; partition_id: string; parts: number }>> {
  return chRows(ch, splitPartitionsSql());
}

/** Merges the partition's parts into one (waits for it; `PARTITION ID` works on 18.16 and current versions). */
export function optimizePartitionSql(table: CompactedTable, partitionId: string): ChSql {
  return chsql`OPTIMIZE TABLE ${raw(table)} PARTITION ID ${partitionId} FINAL`;
}

/** `signal` gives up waiting (the server may still finish the merge). */
export async function optimizePartition(ch: Ch, table: CompactedTable, partitionId: string, signal?: AbortSignal): Promise<void> {
  await ch.command({ query: optimizePartitionSql(table, partitionId).text, abort_signal: signal });
}
