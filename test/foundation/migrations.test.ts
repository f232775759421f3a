import { describe, expect, it } from 'vitest';
import { testConfig } from '../support/env.js';
import { openChdb } from '../support/chdb.js';
import { createCh } from '../../clickhouse/client.js';
import { CLICKHOUSE_MIGRATIONS, migrateClickhouse, serverExecutor } from '../../clickhouse/migrate.js';
import { readMigrations } from '../../lib/migrations.js';
import { createDb } from '../../postgres/client.js';
import { migratePostgres } from '../../postgres/migrate.js';

const cfg = testConfig();
const all = readMigrations(CLICKHOUSE_MIGRATIONS).map((m) => `${m.version}_${m.name}`);

describe('ClickHouse migrations', () => {
  it('apply on the 18.16 server and re-run as a no-op', async () => {
    const ch = createCh(cfg, null);
    const engine = serverExecutor(ch);
    const [row] = await engine.query<{ v: string }>('SELECT version() AS v');
    const v = row?.v;
    expect(v).toMatch(/^18\.16\./);
    const database = `${cfg.CLICKHOUSE_DATABASE}_mig_${Date.now()}`;
    const first = await migrateClickhouse(engine, database);
    expect(first.applied).toEqual(all);
    const second = await migrateClickhouse(engine, database);
    expect(second).toEqual({ applied: [], skipped: all.length });
    await engine.exec(`DROP DATABASE ${database}`);
    await ch.close();
  });

  it('apply on current ClickHouse (chdb) and re-run as a no-op', async () => {
    const chdb = openChdb();
    try {
      expect(Number(chdb.version.split('.')[0])).toBeGreaterThanOrEqual(24);
      const first = await migrateClickhouse(chdb.engine, 'venue');
      expect(first.applied).toEqual(all);
      const second = await migrateClickhouse(chdb.engine, 'venue');
      expect(second).toEqual({ applied: [], skipped: all.length });
      const tables = await chdb.engine.query<{ name: string }>(`SELECT name FROM system.tables WHERE database = 'venue'`);
      expect(tables.map((t) => t.name)).toContain('events');
    } finally {
      chdb.close();
    }
  });
});

describe('Postgres migrations', () => {
  it('are recorded and re-run as a no-op', async () => {
    const db = createDb(cfg, 2);
    const again = await migratePostgres(db);
    expect(again.applied).toEqual([]);
    expect(again.skipped).toBeGreaterThan(0);
    const { rows } = await db.query('SELECT version FROM schema_migrations ORDER BY version');
    expect(rows.length).toBe(again.skipped);
    await db.end();
  });
});
