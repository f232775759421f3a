import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCh, withSettings, type Ch } from '../../clickhouse/client.js';
import { migrateClickhouse, serverExecutor, type ChExecutor } from '../../clickhouse/migrate.js';
import { EVENT_COLUMNS, eventTsvLine, type EventRow } from '../../clickhouse/queries/events.js';
import { repairRollups, type RepairScope } from '../../clickhouse/queries/rollup-repair.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { openChdb } from '../support/chdb.js';
import { testConfig } from '../support/env.js';
import { EVENT_VIEWS, event } from './harness.js';

/*
 * A server that dies inside an INSERT can keep the raw part and lose its views' parts. The state is
 * made here as it is left: views detached while part of the rows is inserted. The same rows under a
 * second venue, inserted whole, are what every rollup must hold once repaired.
 */
const ROLLUPS = [
  { table: 'telemetry_1m', bucket: 'toString(bucket)' },
  { table: 'telemetry_1h', bucket: 'toString(bucket)' },
  { table: 'telemetry_1d', bucket: 'toString(day)' },
];

function rowsOf(operatorId: string, venueId: string): EventRow[] {
  // Across two hours and, in Asia/Kolkata, two local days (18:30 UTC is local midnight).
  const start = Date.UTC(2026, 10, 20, 17, 55, 0);
  return Array.from({ length: 90 }, (_, i) => {
    const device = i % 3 === 0 ? null : `dev-${i % 7}`;
    return toRow(
      event({
        operatorId,
        venueId,
        ts: start + i * 47_000,
        type: i % 2 ? 'environment' : 'device_seen',
        device,
        metrics: i % 2 ? { temperature: 18 + (i % 5) * 0.5, occupancy: i % 11 } : {},
      }),
      { topic: 'repair-test', partition: 0, offset: String(1000 + i), index: 0 },
      { timezone: 'Asia/Kolkata', retentionDays: 90 },
    );
  });
}

const insert = (engine: ChExecutor, rows: EventRow[]) =>
  engine.exec(`INSERT INTO events (${EVENT_COLUMNS.join(', ')}) FORMAT TabSeparated\n${rows.map(eventTsvLine).join('')}`);

const rollups = async (engine: ChExecutor, venueId: string) => {
  const out: Record<string, unknown[]> = {};
  for (const r of ROLLUPS) {
    out[r.table] = await engine.query(
      `SELECT key, ${r.bucket} AS b, retention_days, toString(countMerge(v_count)) AS c, round(sumMerge(v_sum), 6) AS s,
              minMerge(v_min) AS mn, maxMerge(v_max) AS mx, toString(uniqExactMerge(devices)) AS u
         FROM ${r.table} WHERE venue_id = toUUID('${venueId}') GROUP BY key, b, retention_days ORDER BY key, b`,
    );
  }
  return out;
};

function scopeOf(rows: EventRow[]): RepairScope {
  return {
    operatorId: rows[0]!.operator_id,
    venueId: rows[0]!.venue_id,
    fromTs: Math.min(...rows.map((r) => r.ts)),
    toTs: Math.max(...rows.map((r) => r.ts)),
    days: [...new Set(rows.map((r) => r.local_day))],
  };
}

describe.each([
  ['18.16', 'server'],
  ['current ClickHouse (chdb)', 'chdb'],
] as const)('rollups of an insert cut between its raw part and its views, on %s', (_name, kind) => {
  let read: ChExecutor;
  let write: ChExecutor;
  const closers: Array<() => Promise<void> | void> = [];

  beforeAll(async () => {
    if (kind === 'chdb') {
      const chdb = openChdb();
      closers.push(() => chdb.close());
      await migrateClickhouse(chdb.engine, 'default');
      read = write = chdb.engine;
      return;
    }
    // A database of its own: detaching views must not cut another file's inserts.
    const cfg = testConfig();
    const db = `${cfg.CLICKHOUSE_DATABASE}_repair_${Date.now().toString(36)}`;
    const admin = createCh(cfg, null);
    await admin.command({ query: `CREATE DATABASE ${db}` });
    const ch: Ch = createCh({ ...cfg, CLICKHOUSE_DATABASE: db });
    closers.push(async () => {
      await ch.close();
      await admin.command({ query: `DROP DATABASE IF EXISTS ${db}` });
      await admin.close();
    });
    await migrateClickhouse(serverExecutor(ch), db);
    read = serverExecutor(ch);
    write = serverExecutor(withSettings(ch, { insert_deduplicate: 0 }));
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('adds back what the views missed, so every rollup equals that of the same rows inserted whole, and a second run adds nothing', async () => {
    const operatorId = randomUUID();
    const cut = rowsOf(operatorId, randomUUID());
    const whole = rowsOf(operatorId, randomUUID());
    await insert(write, whole);
    await insert(write, cut.slice(0, 40));
    for (const v of EVENT_VIEWS) await write.exec(`DETACH TABLE ${v}`);
    try {
      await insert(write, cut.slice(40));
    } finally {
      for (const v of EVENT_VIEWS) await write.exec(`ATTACH TABLE ${v}`);
    }
    const expected = await rollups(read, whole[0]!.venue_id);
    expect(expected.telemetry_1d!.map((r) => (r as { b: string }).b)).toHaveLength(2 * 3);
    expect(await rollups(read, cut[0]!.venue_id)).not.toEqual(expected);

    const repaired = await repairRollups({ read, write }, [scopeOf(cut)]);
    expect(repaired.toppedUp).toBeGreaterThan(0);
    expect(repaired.excess).toBe(0);
    expect(await rollups(read, cut[0]!.venue_id)).toEqual(expected);

    const again = await repairRollups({ read, write }, [scopeOf(cut)]);
    expect(again).toMatchObject({ toppedUp: 0, excess: 0 });
    expect(again.checked).toBe(repaired.checked);
    expect(await rollups(read, cut[0]!.venue_id)).toEqual(expected);

    // The retention class and a derive mark of the venue, which the cut lost too, are written again.
    expect(await read.query(`SELECT retention_days FROM retention_classes WHERE operator_id = toUUID('${operatorId}')`)).not.toHaveLength(
      0,
    );
    const marks = await read.query<{ n: string }>(
      `SELECT toString(count()) AS n FROM derive_marks WHERE venue_id = toUUID('${cut[0]!.venue_id}')`,
    );
    expect(Number(marks[0]!.n)).toBeGreaterThan(1);
  });

  it('changes nothing where the views took every row', async () => {
    const rows = rowsOf(randomUUID(), randomUUID());
    await insert(write, rows);
    const before = await rollups(read, rows[0]!.venue_id);
    expect(await repairRollups({ read, write }, [scopeOf(rows)])).toMatchObject({ toppedUp: 0, excess: 0 });
    expect(await rollups(read, rows[0]!.venue_id)).toEqual(before);
  });
});
