import { createCh, type Ch } from '../../clickhouse/client.js';
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
