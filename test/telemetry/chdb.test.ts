import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCh, type Ch, type ChSql } from '../../clickhouse/client.js';
import { migrateClickhouse, serverExecutor, type ChExecutor } from '../../clickhouse/migrate.js';
import { operatorActivitySql, operatorEventCountSql } from '../../clickhouse/queries/dashboard.js';
import { insertEvents, storedEventIdsSql, storedOffsetsSql } from '../../clickhouse/queries/events.js';
import { activePartitionsSql, dropPartitionSql, optimizePartitionSql, splitPartitionsSql } from '../../clickhouse/queries/retention.js';
import {
  AGGREGATIONS,
  telemetryPointsSql,
  telemetrySeriesSql,
  type EpochSeriesQuery,
  type SeriesQuery,
} from '../../clickhouse/queries/telemetry.js';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { planBuckets } from '../../domain/telemetry/buckets.js';
import { openChdb } from '../support/chdb.js';
import { testConfig } from '../support/env.js';
import { event } from '../pipeline/harness.js';
import { BERLIN, DAY, dayBucketer, epochBucketer, expectedSeries, HOUR, MINUTE, type Agg } from './expected.js';

/**
 * The same statements on current ClickHouse (chdb, in-process) and on the 18.16 server, over the
 * same rows: every query the service runs must work, and agree, on both.
 */
let chdb: ReturnType<typeof openChdb>;
let server: Ch;
const engines: Array<[string, ChExecutor]> = [];
const operatorId = randomUUID();
const venueId = randomUUID();
const topic = `chdb-test-${randomUUID()}`;
const base = Date.UTC(2026, 9, 24, 21, 0); // three days around the end of DST in Berlin
const events: CanonicalEvent[] = [];

beforeAll(async () => {
  chdb = openChdb();
  await migrateClickhouse(chdb.engine, 'default');
  server = createCh(testConfig());
  engines.push(['current ClickHouse (chdb)', chdb.engine], ['ClickHouse 18.16', serverExecutor(server)]);
  for (let i = 0; i < 60; i++) {
    const at = { operatorId, venueId, ts: base + i * 71 * MINUTE + (i % 7) * 1000 };
    if (i % 3 === 0) events.push(event({ ...at, metrics: { temperature: 10 + (i % 9) / 4, co2: 500 + i } }));
    else if (i % 3 === 1) events.push(event({ ...at, type: 'entry', metrics: { entries: 1 + (i % 4) } }));
    else events.push(event({ ...at, type: 'device_seen', device: `d-${i % 5}` }));
  }
  const rows = events.map((e, i) =>
    toRow(e, { topic, partition: i % 2, offset: String(i), index: 0 }, { timezone: 'Europe/Berlin', retentionDays: 365 }),
  );
  await chdb.engine.exec(`INSERT INTO events FORMAT JSONEachRow\n${rows.map((r) => JSON.stringify(r)).join('\n')}`);
  await insertEvents(server, rows);
});

afterAll(async () => {
  chdb.close();
  await server.close();
});

/** The statement's rows on both engines, which must agree; `asSet` for an answer read in no particular order. */
async function onBoth<T>(statement: ChSql, { asSet = false } = {}): Promise<T[]> {
  const [current, old] = await Promise.all(engines.map(([, e]) => e.query<T>(statement.text)));
  const comparable = (rows: T[]) => (asSet ? rows.map((r) => JSON.stringify(r)).sort() : rows);
  expect(comparable(current!), 'chdb and 18.16 agree').toEqual(comparable(old!));
  return current!;
}

describe('the service queries on current ClickHouse and on 18.16', () => {
  it('answer telemetry queries at every resolution with every aggregation', async () => {
    const cases: Array<[number, number, number, ReturnType<typeof epochBucketer>]> = [
      [base, base + 2 * DAY, MINUTE, epochBucketer(base, base + 2 * DAY, MINUTE)],
      [base, base + 3 * DAY, HOUR, epochBucketer(base, base + 3 * DAY, HOUR)],
      [base - DAY, base + 4 * DAY, DAY, dayBucketer(base - DAY, base + 4 * DAY, 1, BERLIN)],
    ];
    for (const [start, end, interval, bucketOf] of cases) {
      const plan = planBuckets(start, end, interval, 'Europe/Berlin');
      for (const agg of AGGREGATIONS) {
        const q = { ...plan, operatorId, venueId, keys: ['temperature', 'entries', 'devices'], agg } as SeriesQuery;
        const rows = await onBoth<{ key: string; t: number; value: number }>(telemetrySeriesSql(q));
        for (const key of q.keys) {
          const got = rows.filter((r) => r.key === key).map((r) => ({ ts: plan.startOf(r.t), value: r.value }));
          const want = expectedSeries(events, key, agg as Agg, bucketOf);
          expect(
            got.map((p) => p.ts),
            `${key} ${agg} ${interval}`,
          ).toEqual(want.map((p) => p.ts));
          got.forEach((p, i) => expect(p.value).toBeCloseTo(want[i]!.value, 9));
          expect(want.length).toBeGreaterThan(0);
        }
      }
    }
  });

  it('write the points of each key identically, with the values of the row query', async () => {
    for (const interval of [MINUTE, 5 * MINUTE, HOUR]) {
      const plan = planBuckets(base, base + 2 * DAY, interval, 'Europe/Berlin');
      for (const agg of AGGREGATIONS) {
        const q = { ...plan, operatorId, venueId, keys: ['temperature', 'noise', 'entries', 'devices'], agg } as EpochSeriesQuery;
        const rows = await onBoth<{ key: string; t: number; value: number }>(telemetrySeriesSql(q));
        for (const key of q.keys) {
          const points = await onBoth<{ ts: number; value: number | null }>(telemetryPointsSql(q, key));
          const want = rows.filter((r) => r.key === key).map((r) => ({ ts: r.t * 1000, value: Number.isFinite(r.value) ? r.value : null }));
          expect(points, `${key} ${agg} ${interval}`).toEqual(want);
        }
        expect(rows.some((r) => r.key === 'temperature')).toBe(true);
        expect(
          rows.some((r) => r.key === 'noise'),
          'a key without data',
        ).toBe(false);
      }
    }
  });

  it('answer the dashboard and sink queries', async () => {
    const [count] = await onBoth<{ events: number }>(
      operatorEventCountSql({ operatorId, fromSec: base / 1000, toSec: (base + DAY) / 1000 }),
    );
    expect(count!.events).toBe(events.filter((e) => e.ts < base + DAY).length);
    const activity = await onBoth<{ t: number; key: string; value: number }>(
      operatorActivitySql({ operatorId, fromSec: base / 1000, toSec: (base + 3 * DAY) / 1000, bucketSec: 86_400 }),
    );
    expect(activity.filter((r) => r.key === 'events').reduce((n, r) => n + r.value, 0)).toBe(events.length);
    // The sink reads the stored positions as a set: in no particular order.
    const stored = await onBoth<{ partition: number; offset: string }>(
      storedOffsetsSql({ topic, ranges: [{ partition: 1, fromOffset: 10n, toOffset: 20n }], fromTs: 0, toTs: 2 ** 32 - 1 }),
      { asSet: true },
    );
    expect(stored.map((r) => Number(r.offset)).sort((a, b) => a - b)).toEqual([11, 13, 15, 17, 19]);
    expect(stored.every((r) => r.partition === 1)).toBe(true);
    // Each partition within its own range: none of partition 0's rows between 10 and 20, none of partition 1's past 20.
    const two = await onBoth<{ partition: number; offset: string }>(
      storedOffsetsSql({
        topic,
        ranges: [
          { partition: 1, fromOffset: 10n, toOffset: 14n },
          { partition: 0, fromOffset: 30n, toOffset: 34n },
        ],
        fromTs: 0,
        toTs: 2 ** 32 - 1,
      }),
      { asSet: true },
    );
    expect(two.map((r) => `${r.partition}:${r.offset}`).sort()).toEqual(['0:30', '0:32', '0:34', '1:11', '1:13']);
    const ids = await onBoth<{ id: string }>(
      storedEventIdsSql({
        ids: [events[3]!.id, randomUUID()],
        operatorIds: [operatorId],
        venueIds: [events[3]!.venueId],
        fromTs: 0,
        toTs: 2 ** 32 - 1,
      }),
    );
    expect(ids).toEqual([{ id: events[3]!.id }]);
  });

  it('list and drop partitions by id', async () => {
    const [, current] = engines[0]!;
    const parts = await current.query<{ table: string; partition_id: string }>(activePartitionsSql().text);
    expect(parts).toContainEqual({ table: 'events', partition_id: '365-20261024' });
    expect(parts).toContainEqual({ table: 'telemetry_1h', partition_id: '365-202610' });
    await current.exec(dropPartitionSql('events', '365-20261024').text);
    const after = await current.query<{ table: string; partition_id: string }>(activePartitionsSql().text);
    expect(after).not.toContainEqual({ table: 'events', partition_id: '365-20261024' });
  });

  it('find partitions in several parts and merge one by id', async () => {
    const [, current] = engines[0]!;
    const row = toRow(
      event({ operatorId, venueId, ts: base + 60_000, metrics: { temperature: 30 } }),
      { topic, partition: 0, offset: '1000', index: 0 },
      { timezone: 'Europe/Berlin', retentionDays: 365 },
    );
    // No background merge between the insert and the look: the partition is in two parts.
    await current.exec('SYSTEM STOP MERGES telemetry_1m');
    await current.exec(`INSERT INTO events FORMAT JSONEachRow\n${JSON.stringify(row)}`);
    const split = await current.query<{ table: string; partition_id: string; parts: number }>(splitPartitionsSql().text);
    expect(split).toContainEqual({ table: 'telemetry_1m', partition_id: '365-20261024', parts: 2 });
    await current.exec('SYSTEM START MERGES telemetry_1m');
    await current.exec(optimizePartitionSql('telemetry_1m', '365-20261024').text);
    const merged = await current.query<{ table: string; partition_id: string }>(splitPartitionsSql().text);
    expect(merged.filter((p) => p.table === 'telemetry_1m' && p.partition_id === '365-20261024')).toEqual([]);
  });
});
