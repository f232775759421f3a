import pg from 'pg';
import { chRows, chsql, clusterConfig, raw, type Ch } from '../../clickhouse/client.js';
import type { Config } from '../../lib/config.js';
import { createDb } from '../../postgres/client.js';
import { migratePostgres } from '../../postgres/migrate.js';

/** Drops and recreates the run's Postgres database `name` and migrates it (the ClickHouse side is the caller's). */
export async function freshPostgres(adminUrl: string, cfg: Config, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const db = createDb(cfg, 2);
  await migratePostgres(db);
  await db.end();
}

/**
 * Drops earlier runs' databases (`<prefix>…` and their `_local` twins) on every node of the
 * cluster `cfg` names, except this run's. Dropping a replicated table removes its replica from
 * ZooKeeper; the last one removes the table's path.
 */
export async function dropEarlierClusterDatabases(cfg: Config, prefix: string): Promise<void> {
  const cluster = clusterConfig(cfg)!;
  for (const url of cluster.nodes) {
    const ch = cluster.nodeClient(url, null, { requestTimeoutMs: 300_000 });
    try {
      const dbs = await chRows<{ name: string }>(ch, chsql`SELECT name FROM system.databases WHERE startsWith(name, ${prefix})`);
      for (const { name } of dbs) {
        if (name === cfg.CLICKHOUSE_DATABASE || name === cluster.localDatabase(cfg.CLICKHOUSE_DATABASE)) continue;
        await ch.command({ query: `DROP DATABASE IF EXISTS ${name}` });
      }
    } finally {
      await ch.close();
    }
  }
}

/** Tables a replica must hold exactly as its shard-mate once the pipeline has drained. */
const COMPARED = ['events', 'telemetry_1m', 'telemetry_1h', 'telemetry_1d', 'occupancy_updates'] as const;

async function counts(ch: Ch): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of COMPARED) {
    const [row] = await chRows<{ n: string }>(ch, raw(`SELECT toString(count()) AS n FROM ${t}`));
    out[t] = Number(row?.n ?? 0);
  }
  return out;
}

async function queueSize(ch: Ch): Promise<number> {
  const [row] = await chRows<{ n: string }>(
    ch,
    chsql`SELECT toString(sum(queue_size)) AS n FROM system.replicas WHERE database = currentDatabase()`,
  );
  return Number(row?.n ?? 0);
}

/**
 * Waits (up to `timeoutMs`) until the restarted replica `victim` holds the same rows as its
 * shard-mate in every compared table and has nothing left in its replication queue. Returns what
 * each holds and how long it took from this call.
 */
export async function replicaCounts(
  cfg: Config,
  victim: { name: string; url: string },
  mate: { name: string; url: string },
  timeoutMs: number,
): Promise<{
  caughtUp: boolean;
  catchUpWaitMs: number;
  victimRows: Record<string, number>;
  mateRows: Record<string, number>;
  victimQueue: number;
}> {
  const cluster = clusterConfig(cfg)!;
  const local = cluster.localDatabase(cfg.CLICKHOUSE_DATABASE);
  const v = cluster.nodeClient(victim.url, local);
  const m = cluster.nodeClient(mate.url, local);
  const t0 = Date.now();
  try {
    for (;;) {
      const [victimRows, mateRows, victimQueue] = await Promise.all([counts(v), counts(m), queueSize(v)]);
      const same = COMPARED.every((t) => victimRows[t] === mateRows[t]);
      if ((same && victimQueue === 0) || Date.now() - t0 > timeoutMs) {
        return { caughtUp: same && victimQueue === 0, catchUpWaitMs: Date.now() - t0, victimRows, mateRows, victimQueue };
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    await v.close();
    await m.close();
  }
}

/**
 * What a replica has still to do: its queue, the log entries not yet pulled into it, and a replica
 * still read-only (not yet connected to ZooKeeper after a start) counted as far behind.
 */
async function behind(ch: Ch): Promise<number> {
  const [row] = await chRows<{ n: string }>(
    ch,
    chsql`SELECT toString(count() + sum(queue_size) + sum(if(log_max_index > log_pointer, log_max_index - log_pointer, 0)) + sum(is_readonly) * 1000000) AS n
            FROM system.replicas WHERE database = currentDatabase()`,
  );
  // count() is there so that a replica whose tables are not loaded yet never reads as caught up.
  const tables = await chRows<{ n: string }>(
    ch,
    chsql`SELECT toString(count()) AS n FROM system.replicas WHERE database = currentDatabase()`,
  );
  return Number(row?.n ?? 1) - Number(tables[0]?.n ?? 0) + (Number(tables[0]?.n ?? 0) === 0 ? 1 : 0);
}

/** When `node`'s replication queue (every table of the run's database) was first seen empty after this call, or null within `timeoutMs`. */
export async function replicationQueueEmpty(cfg: Config, node: { url: string }, timeoutMs: number): Promise<number | null> {
  const cluster = clusterConfig(cfg)!;
  const ch = cluster.nodeClient(node.url, cluster.localDatabase(cfg.CLICKHOUSE_DATABASE));
  const t0 = Date.now();
  try {
    while (Date.now() - t0 < timeoutMs) {
      const n = await behind(ch).catch(() => -1);
      if (n === 0) return Date.now();
      await new Promise((r) => setTimeout(r, 250));
    }
    return null;
  } finally {
    await ch.close();
  }
}
