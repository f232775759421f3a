import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCh, type Ch } from '../../clickhouse/client.js';
import { migrateClickhouse, serverExecutor, type ChExecutor } from '../../clickhouse/migrate.js';
import { testConfig } from '../support/env.js';
import { waitFor } from './harness.js';

let ch: Ch;
let engine: ChExecutor;
const database = `${testConfig().CLICKHOUSE_DATABASE}_schema_${Date.now()}`;

beforeAll(async () => {
  ch = createCh(testConfig(), null);
  engine = serverExecutor(ch);
  await migrateClickhouse(engine, database);
});

afterAll(async () => {
  await engine.exec(`DROP DATABASE IF EXISTS ${database}`);
  await ch.close();
});

describe('the telemetry schema on 18.16', () => {
  it('has the raw table and the rollup tables with a view each, and no points table (migration 0008)', async () => {
    const tables = await engine.query<{ name: string; engine: string }>(
      `SELECT name, engine FROM system.tables WHERE database = '${database}' ORDER BY name`,
    );
    expect(tables.map((t) => `${t.name}:${t.engine}`)).toEqual(
      expect.arrayContaining([
        'events:MergeTree',
        'telemetry_1m:AggregatingMergeTree',
        'telemetry_1m_mv:MaterializedView',
        'telemetry_1h:AggregatingMergeTree',
        'telemetry_1h_mv:MaterializedView',
        'telemetry_1d:AggregatingMergeTree',
        'telemetry_1d_mv:MaterializedView',
      ]),
    );
    expect(tables.map((t) => t.name)).not.toContain('telemetry_points');
    expect(tables.map((t) => t.name)).not.toContain('telemetry_points_mv');
  });

  it('re-runs an ADD COLUMN migration interrupted before its ledger row as a no-op', async () => {
    // A crash between the ALTER and the ledger insert: the column exists, the row does not.
    await engine.exec(`ALTER TABLE ${database}.schema_migrations DELETE WHERE version = 2`);
    await waitFor('the ledger row to go', async () => {
      const [row] = await engine.query<{ n: string }>(`SELECT count() AS n FROM ${database}.schema_migrations WHERE version = 2`);
      return Number(row!.n) === 0;
    });
    const report = await migrateClickhouse(engine, database);
    expect(report.applied).toEqual(['2_local_day']);
    const columns = await engine.query<{ name: string }>(
      `SELECT name FROM system.columns WHERE database = '${database}' AND table = 'events' AND name = 'local_day'`,
    );
    expect(columns).toHaveLength(1);
  });
});
