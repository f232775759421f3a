import { chRows, chsql, createCh, type Ch } from '../../clickhouse/client.js';
import { migrateClickhouse, serverExecutor } from '../../clickhouse/migrate.js';
import { createDb, type Db } from '../../postgres/client.js';
import { testConfig } from '../support/env.js';

export interface ScratchDatabase {
  database: string;
  /** A client of no database: system tables, SYSTEM statements. */
  admin: Ch;
  ch: Ch;
  db: Db;
  /** Drops the database and closes the clients. */
  close(): Promise<void>;
}

/** A freshly migrated ClickHouse database of a derive test's own (`<db>_<tag>_<time>`), and Postgres. */
export async function scratchDatabase(tag: string): Promise<ScratchDatabase> {
  const cfg = testConfig();
  const database = `${cfg.CLICKHOUSE_DATABASE}_${tag}_${Date.now()}`;
  const admin = createCh(cfg, null);
  await migrateClickhouse(serverExecutor(admin), database);
  const ch = createCh(cfg, database);
  const db = createDb(cfg, 2);
  return {
    database,
    admin,
    ch,
    db,
    async close() {
      await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
      await ch.close();
      await admin.close();
      await db.end();
    },
  };
}

/** Each venue's live visits and last occupancy figure, as the derive job stored them. */
export async function storedFigures(ch: Ch): Promise<Map<string, { visits: number; occupancy: number }>> {
  const rows = await chRows<{ venue_id: string; visits: string; occupancy: string }>(
    ch,
    chsql`SELECT v.venue_id AS venue_id, toString(v.visits) AS visits, toString(o.value) AS occupancy
            FROM (SELECT venue_id, count() AS visits
                    FROM (SELECT venue_id, zone_id, device, start_ms, argMax(live, version) AS alive
                            FROM derived_visits GROUP BY venue_id, zone_id, device, start_ms HAVING alive = 1)
                   GROUP BY venue_id) AS v
            ANY LEFT JOIN (SELECT venue_id, argMax(value, toUInt64(ts) * 1000 + ts_ms) AS value FROM derived_occupancy GROUP BY venue_id) AS o
            USING venue_id`,
  );
  return new Map(rows.map((r) => [r.venue_id, { visits: Number(r.visits), occupancy: Number(r.occupancy) }]));
}
