import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createCh } from '../../clickhouse/client.js';
import { CLICKHOUSE_MIGRATIONS, migrateClickhouse, serverExecutor, type ChExecutor } from '../../clickhouse/migrate.js';
import { readMigrations, splitStatements } from '../../lib/migrations.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { openChdb } from '../support/chdb.js';
import { testConfig } from '../support/env.js';
import { telemetrySeriesSql } from '../../clickhouse/queries/telemetry.js';
import { deviceId, event, waitFor } from './harness.js';

/**
 * Migrations that change tables already holding rows, applied to a database migrated up to the
 * version before them, on both engines:
 * - 0007 copies the minute rollup into a table with 1,024-row granules: every stored row survives
 *   it (a re-run after a crash included, never counted twice), and the views feed the new table;
 * - 0008 drops the points table and its view: the raw rows and rollups stay, and inserts into the
 *   raw table go on feeding the rollups;
 * - 0009 stops the daily rollup's device sets: a day's `devices` stays exact across the change,
 *   its devices before it and after it counted once.
 */
const REBUILD = 7;
const DROP_POINTS = 8;
const DAILY_DEVICES = 9;
const rebuild = readMigrations(CLICKHOUSE_MIGRATIONS).find((m) => m.version === REBUILD)!;
const dirs: string[] = [];
/** A copy of the migrations up to and including `last`. */
function migrationsThrough(last: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'ch-migrations-'));
  dirs.push(dir);
  for (const file of readdirSync(CLICKHOUSE_MIGRATIONS).filter((f) => f.endsWith('.sql') && Number.parseInt(f, 10) <= last)) {
    copyFileSync(join(CLICKHOUSE_MIGRATIONS, file), join(dir, file));
  }
  return dir;
}
const beforeRebuild = migrationsThrough(REBUILD - 1);
const throughRebuild = migrationsThrough(REBUILD);
const throughPointsDrop = migrationsThrough(DROP_POINTS);
const throughDailyDevices = migrationsThrough(DAILY_DEVICES);
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const MINUTE = 60_000;
const base = Date.UTC(2026, 10, 20, 10, 0);

function eventsSql(db: string, operatorId: string, venueId: string, minutes: number[], offset: number, devices: string[] = []): string {
  const rows = minutes.map((m, i) =>
    toRow(
      event({
        operatorId,
        venueId,
        ts: base + m * MINUTE + 1000,
        metrics: { temperature: 20 + m, co2: 400 + 10 * i },
        ...(devices[i] ? { device: deviceId(devices[i]) } : {}),
      }),
      { topic: 'rebuild', partition: 0, offset: String(offset + i), index: 0 },
      { timezone: 'UTC', retentionDays: 90 },
    ),
  );
  return `INSERT INTO ${db}.events FORMAT JSONEachRow\n${rows.map((r) => JSON.stringify(r)).join('\n')}`;
}

function occupancySql(db: string, operatorId: string, venueId: string, minute: number, value: number): string {
  const ts = new Date(base + minute * MINUTE);
  const row = {
    operator_id: operatorId,
    venue_id: venueId,
    zone_id: '',
    ts: ts.toISOString().slice(0, 19).replace('T', ' '),
    ts_ms: 0,
    local_day: ts.toISOString().slice(0, 10),
    value,
    capacity: null,
    percent: null,
    reason: 'flow',
    clamped: 0,
    retention_days: 90,
    kafka_topic: 'rebuild',
    kafka_partition: 0,
    kafka_offset: minute,
  };
  return `INSERT INTO ${db}.occupancy_updates FORMAT JSONEachRow\n${JSON.stringify(row)}`;
}

interface Minute {
  key: string;
  t: number;
  n: number;
  avg: number;
}

async function minutes(engine: ChExecutor, db: string, venueId: string): Promise<Minute[]> {
  const rows = await engine.query<{ key: string; t: number | string; n: number | string; avg: number }>(
    `SELECT key, toUInt32(bucket) AS t, toFloat64(countMerge(v_count)) AS n, sumMerge(v_sum) / countMerge(v_count) AS avg
       FROM ${db}.telemetry_1m WHERE venue_id = toUUID('${venueId}') AND key IN ('temperature', 'co2', 'occupancy')
      GROUP BY key, t ORDER BY key, t`,
  );
  return rows.map((r) => ({ key: r.key, t: Number(r.t), n: Number(r.n), avg: Number(r.avg) }));
}

async function granularity(engine: ChExecutor, db: string): Promise<number> {
  const [row] = await engine.query<{ statement: string }>(`SHOW CREATE TABLE ${db}.telemetry_1m`);
  return Number(/index_granularity = (\d+)/.exec(row!.statement)?.[1] ?? 8192);
}

async function forgetLedgerRow(engine: ChExecutor, db: string, version: number): Promise<void> {
  await engine.exec(`ALTER TABLE ${db}.schema_migrations DELETE WHERE version = ${version}`);
  await waitFor('the ledger row to go', async () => {
    const [row] = await engine.query<{ n: number | string }>(`SELECT count() AS n FROM ${db}.schema_migrations WHERE version = ${version}`);
    return Number(row!.n) === 0;
  });
}

async function rebuildKeepsRows(engine: ChExecutor, db: string): Promise<void> {
  const operatorId = randomUUID();
  const venueId = randomUUID();
  await migrateClickhouse(engine, db, beforeRebuild);
  expect(await granularity(engine, db)).toBe(8192);
  await engine.exec(eventsSql(db, operatorId, venueId, [0, 0, 1, 2, 2, 2], 0));
  await engine.exec(occupancySql(db, operatorId, venueId, 1, 7));
  const stored = await minutes(engine, db, venueId);
  expect(stored.filter((m) => m.key === 'temperature').map((m) => m.n)).toEqual([2, 1, 3]);
  expect(stored.filter((m) => m.key === 'occupancy')).toHaveLength(1);

  // A first run cut short in the middle of its copy: the new table exists and holds some of the rows.
  const statements = splitStatements(rebuild.sql.replaceAll('{db}', db));
  for (const s of statements.slice(
    0,
    statements.findIndex((s) => s.startsWith('TRUNCATE')),
  ))
    await engine.exec(s);
  await engine.exec(`INSERT INTO ${db}.telemetry_1m_fine SELECT * FROM ${db}.telemetry_1m LIMIT 2`);

  expect((await migrateClickhouse(engine, db, throughRebuild)).applied).toEqual([`${REBUILD}_telemetry_1m_granules`]);
  expect(await granularity(engine, db)).toBe(1024);
  expect(await minutes(engine, db, venueId)).toEqual(stored);

  // A crash after the copy and before the ledger row: the file runs again from its first statement.
  await forgetLedgerRow(engine, db, REBUILD);
  expect((await migrateClickhouse(engine, db, throughRebuild)).applied).toEqual([`${REBUILD}_telemetry_1m_granules`]);
  expect(await minutes(engine, db, venueId)).toEqual(stored);

  // Both views write into the rebuilt table.
  await engine.exec(eventsSql(db, operatorId, venueId, [2, 3], 100));
  await engine.exec(occupancySql(db, operatorId, venueId, 3, 9));
  const after = await minutes(engine, db, venueId);
  expect(after.filter((m) => m.key === 'temperature').map((m) => m.n)).toEqual([2, 1, 4, 1]);
  expect(after.filter((m) => m.key === 'occupancy').map((m) => m.avg)).toEqual([7, 9]);
  const tables = await engine.query<{ name: string }>(
    `SELECT name FROM system.tables WHERE database = '${db}' AND name LIKE 'telemetry_1m%' ORDER BY name`,
  );
  expect(tables.map((t) => t.name)).toEqual(['telemetry_1m', 'telemetry_1m_mv']);
}

async function pointsDropKeepsRows(engine: ChExecutor, db: string): Promise<void> {
  const operatorId = randomUUID();
  const venueId = randomUUID();
  await migrateClickhouse(engine, db, throughRebuild);
  await engine.exec(eventsSql(db, operatorId, venueId, [0, 0, 1], 0));
  const [points] = await engine.query<{ n: number | string }>(`SELECT count() AS n FROM ${db}.telemetry_points`);
  expect(Number(points!.n)).toBe(6);
  const stored = await minutes(engine, db, venueId);

  expect((await migrateClickhouse(engine, db, throughPointsDrop)).applied).toEqual([`${DROP_POINTS}_drop_telemetry_points`]);
  const tables = await engine.query<{ name: string }>(
    `SELECT name FROM system.tables WHERE database = '${db}' AND name LIKE 'telemetry_points%'`,
  );
  expect(tables).toEqual([]);
  const [raw] = await engine.query<{ rows: number | string; points: number | string }>(
    `SELECT count() AS rows, sum(length(metric_values)) AS points FROM ${db}.events WHERE venue_id = toUUID('${venueId}')`,
  );
  expect([Number(raw!.rows), Number(raw!.points)]).toEqual([3, 6]);
  expect(await minutes(engine, db, venueId)).toEqual(stored);

  // A crash before the ledger row: the file runs again without an error.
  await forgetLedgerRow(engine, db, DROP_POINTS);
  expect((await migrateClickhouse(engine, db, throughPointsDrop)).applied).toEqual([`${DROP_POINTS}_drop_telemetry_points`]);

  // The raw table takes inserts again (a view left on the dropped table would fail them) and feeds the rollups.
  await engine.exec(eventsSql(db, operatorId, venueId, [1, 2], 100));
  const after = await minutes(engine, db, venueId);
  expect(after.filter((m) => m.key === 'temperature').map((m) => m.n)).toEqual([2, 2, 1]);
}

async function dailyDevicesStayExact(engine: ChExecutor, db: string): Promise<void> {
  const operatorId = randomUUID();
  const venueId = randomUUID();
  await migrateClickhouse(engine, db, throughPointsDrop);
  await engine.exec(eventsSql(db, operatorId, venueId, [0, 1], 0, ['d1', 'd2']));
  const setRows = async () =>
    Number((await engine.query<{ n: number | string }>(`SELECT count() AS n FROM ${db}.telemetry_1d WHERE key = 'devices'`))[0]!.n);
  const before = await setRows();
  expect(before).toBeGreaterThan(0);

  expect((await migrateClickhouse(engine, db, throughDailyDevices)).applied).toEqual([`${DAILY_DEVICES}_daily_devices_from_hours`]);
  await engine.exec(eventsSql(db, operatorId, venueId, [2, 3], 100, ['d2', 'd3']));
  expect(await setRows()).toBe(before);

  // The service's own query (its tables named in this database): d1, d2 before, d2, d3 after.
  const day = Math.floor(base / 86_400_000);
  const sql = telemetrySeriesSql({
    resolution: '1d',
    operatorId,
    venueId,
    keys: ['devices', 'temperature'],
    agg: 'COUNT',
    fromDay: new Date(day * 86_400_000).toISOString().slice(0, 10),
    toDay: new Date(day * 86_400_000).toISOString().slice(0, 10),
    bucketDays: 1,
    timezone: 'UTC',
    fromSec: day * 86_400,
    toSec: (day + 1) * 86_400,
  }).text.replace(/\b(FROM|IN \(SELECT retention_days FROM) (telemetry_\w+|retention_classes)\b/g, `$1 ${db}.$2`);
  const rows = await engine.query<{ key: string; t: number | string; value: number | string }>(sql);
  expect(rows.map((r) => [r.key, Number(r.t), Number(r.value)])).toEqual([
    ['devices', day, 3],
    ['temperature', day, 4],
  ]);
}

type Check = (engine: ChExecutor, db: string) => Promise<void>;

/** Runs `check` on a fresh database of the 18.16 server, dropped afterwards. */
const onServer = (name: string, check: Check) => async () => {
  const ch = createCh(testConfig(), null);
  const engine = serverExecutor(ch);
  const db = `${testConfig().CLICKHOUSE_DATABASE}_${name}_${Date.now()}`;
  try {
    await check(engine, db);
  } finally {
    await engine.exec(`DROP DATABASE IF EXISTS ${db}`);
    await ch.close();
  }
};

/** Runs `check` on current ClickHouse (chdb). */
const onChdb = (name: string, check: Check) => async () => {
  const chdb = openChdb();
  try {
    await check(chdb.engine, name);
  } finally {
    chdb.close();
  }
};

describe('the minute rollup rebuilt with finer granules (migration 0007)', () => {
  it('keeps every row and its views on 18.16, also when re-run', onServer('rebuild', rebuildKeepsRows));
  it('keeps every row and its views on current ClickHouse (chdb), also when re-run', onChdb('rebuild', rebuildKeepsRows));
});

describe('the points table dropped (migration 0008)', () => {
  it('keeps the raw rows and rollups on 18.16, and the raw table takes inserts again', onServer('points', pointsDropKeepsRows));
  it(
    'keeps the raw rows and rollups on current ClickHouse (chdb), and the raw table takes inserts again',
    onChdb('points', pointsDropKeepsRows),
  );
});

describe('the daily rollup without device sets (migration 0009)', () => {
  it("keeps a day's devices exact across the change on 18.16", onServer('daily_devices', dailyDevicesStayExact));
  it("keeps a day's devices exact across the change on current ClickHouse (chdb)", onChdb('daily_devices', dailyDevicesStayExact));
});
