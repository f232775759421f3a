import { chRows, chsql, clusterOf, localDatabaseOf, type Ch, type ChCluster } from '../clickhouse/client.js';
import { activePartitions, dropPartition, type RetainedTable } from '../clickhouse/queries/retention.js';
import type { Logger } from '../lib/logger.js';

const DAY_MS = 86_400_000;

/**
 * The daily rollup's partitions are venue-local days; a local day can end up to 12 h after the
 * UTC day of the same date, so they are kept one day longer rather than dropped early.
 */
const GRACE_MS: Partial<Record<RetainedTable, number>> = { telemetry_1d: DAY_MS, derived_visits: DAY_MS };

/**
 * A partition id is `<retention_days>-<YYYYMMDD>` or `<retention_days>-<YYYYMM>` (ClickHouse joins
 * the tuple's parts with '-'). Returns its class and the end of the period it covers (UTC, exclusive).
 */
export function parsePartitionId(id: string): { retentionDays: number; endMs: number } | undefined {
  const m = /^(\d+)-(\d{4})(\d{2})(\d{2})?$/.exec(id);
  if (!m) return undefined;
  const [, days, y, mo, d] = m;
  const endMs = d === undefined ? Date.UTC(Number(y), Number(mo), 1) : Date.UTC(Number(y), Number(mo) - 1, Number(d) + 1);
  return { retentionDays: Number(days), endMs };
}

/**
 * When the last instant a partition of `table` can hold has passed: the end of its period, a day
 * later for local-day partitions. Undefined for an id that is not `<class>-<period>`.
 */
export function partitionEnd(table: RetainedTable, partitionId: string): { retentionDays: number; endMs: number } | undefined {
  const p = parsePartitionId(partitionId);
  return p && { retentionDays: p.retentionDays, endMs: p.endMs + (GRACE_MS[table] ?? 0) };
}

/** Expired when everything it can hold is older than its class's window. */
export function isExpired(table: RetainedTable, partitionId: string, now: number): boolean {
  const p = partitionEnd(table, partitionId);
  return p !== undefined && p.endMs + p.retentionDays * DAY_MS <= now;
}

/** Drops every expired partition of the retained tables; returns what it dropped. */
export async function dropExpiredPartitions(
  ch: Ch,
  log: Logger,
  now = Date.now(),
): Promise<Array<{ table: RetainedTable; partitionId: string }>> {
  const cluster = clusterOf(ch);
  if (cluster) return dropExpiredOnCluster(ch, cluster, log, now);
  const dropped: Array<{ table: RetainedTable; partitionId: string }> = [];
  for (const { table, partition_id } of await activePartitions(ch)) {
    if (!isExpired(table, partition_id, now)) continue;
    await dropPartition(ch, table, partition_id);
    dropped.push({ table, partitionId: partition_id });
  }
  if (dropped.length > 0) log.info({ dropped }, 'retention: dropped expired partitions');
  return dropped;
}

/**
 * Cluster mode: `ch` reads the Distributed tables, which hold no parts. Every node is asked for the
 * partitions of its replicated tables (`<database>_local`), and a partition is dropped on the
 * replica that leads the table's replication in its shard: the drop goes through the replication
 * log to the other replica (at once, or when it comes back). 18.16 forwards a DROP PARTITION sent
 * to a follower to the leader as the `default` user without a password, which a protected server
 * refuses, so followers are not asked to. A node that does not answer is skipped (logged): its
 * shard's other replica leads once ZooKeeper has expired the dead one's session. Returns each
 * (table, partition) once, as on one server, however many shards held it.
 */
async function dropExpiredOnCluster(
  ch: Ch,
  cluster: ChCluster,
  log: Logger,
  now: number,
): Promise<Array<{ table: RetainedTable; partitionId: string }>> {
  const local = await localDatabaseOf(ch, cluster);
  const dropped = new Map<string, { table: RetainedTable; partitionId: string }>();
  for (const url of cluster.nodes) {
    const node = cluster.nodeClient(url, local, { requestTimeoutMs: 600_000 });
    try {
      const led = new Set(
        (
          await chRows<{ table: string }>(node, chsql`SELECT table FROM system.replicas WHERE database = currentDatabase() AND is_leader`)
        ).map((r) => r.table),
      );
      for (const { table, partition_id } of await activePartitions(node)) {
        if (!led.has(table) || !isExpired(table, partition_id, now)) continue;
        await dropPartition(node, table, partition_id);
        dropped.set(`${table}\t${partition_id}`, { table, partitionId: partition_id });
      }
    } catch (err) {
      log.warn({ node: url, err }, 'retention: node skipped (its shard is handled by the replica that leads it)');
    } finally {
      await node.close();
    }
  }
  const out = [...dropped.values()];
  if (out.length > 0) log.info({ dropped: out }, 'retention: dropped expired partitions on the cluster');
  return out;
}
