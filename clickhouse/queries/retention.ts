import { chExec, chRows, chsql, raw, type Ch, type ChSql } from '../client.js';

/** Tables partitioned by (retention_days, day or month), and so cleaned by whole partitions. */
export const RETAINED_TABLES = ['events', 'telemetry_points', 'telemetry_1m', 'telemetry_1h', 'telemetry_1d'] as const;
/** The processors' output tables and the loyalty rollup, partitioned the same way. */
export const DERIVED_TABLES = ['occupancy_updates', 'visits', 'visit_days', 'connector_health'] as const;
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
