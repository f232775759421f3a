import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chsql, createCh, type Ch, type ChSql } from '../../clickhouse/client.js';
import { migrateClickhouse, serverExecutor, type ChExecutor } from '../../clickhouse/migrate.js';
import {
  averageDwellSql,
  currentOccupancySql,
  dwellHistogramSql,
  latestHealthSql,
  occupancyHoursSql,
  visitDaysSql,
  type HealthRow,
  type OccupancyRow,
} from '../../clickhouse/queries/derived.js';
import { MARK_KIND, occupancyBeforeSql, type DerivedOccupancyRow } from '../../clickhouse/queries/derive.js';
import {
  sightingKeysSql,
  visitCheckpointSql,
  visitStatesSql,
  type DerivedVisitRow,
  type ScopeKeys,
} from '../../clickhouse/queries/derive-visits.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { dwellInWindowsSql, eventsInWindowsSql, venueOccupanciesSql } from '../../clickhouse/queries/portfolio.js';
import { activePartitionsSql } from '../../clickhouse/queries/retention.js';
import { telemetrySeriesSql } from '../../clickhouse/queries/telemetry.js';
import type { EventType } from '../../lib/events/vocabulary.js';
import { closesAt, foldRuns, qualifies } from '../../domain/analytics/visit-runs.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { openChdb } from '../support/chdb.js';
import { testConfig } from '../support/env.js';
import { deviceId, event } from './harness.js';

/** The derived tables, views and queries on current ClickHouse (chdb) and 18.16, over the same rows. */
let chdb: ReturnType<typeof openChdb>;
let server: Ch;
const engines: ChExecutor[] = [];
const operatorId = randomUUID();
const venueId = randomUUID();
const zoneId = randomUUID();
const integrationId = randomUUID();
const topic = `chdb-derived-${randomUUID()}`;
const base = Date.UTC(2026, 9, 24, 21, 0);
const sunk = (i: number) => ({ retention_days: 365, kafka_topic: topic, kafka_partition: 0, kafka_offset: String(i) });

const occupancy: OccupancyRow[] = [0, 1, 2, 3].map((i) => ({
  operator_id: operatorId,
  venue_id: venueId,
  zone_id: i === 3 ? zoneId : '',
  ts: base / 1000 + i * 600,
  ts_ms: 0,
  local_day: '2026-10-24',
  value: [4, 6, 2, 9][i]!,
  capacity: i === 3 ? 20 : null,
  percent: i === 3 ? 45 : null,
  reason: 'flow',
  clamped: 0,
  ...sunk(i),
}));
const visit = (i: number, device: string, day: string, dwell: number, zone = '', live = 1, version = 1): DerivedVisitRow => ({
  operator_id: operatorId,
  venue_id: venueId,
  day,
  zone_id: zone,
  device,
  start_ms: base + i * 60_000,
  end_ms: base + i * 60_000 + dwell * 1000,
  closes_ms: base + i * 60_000 + dwell * 1000 + 900_000,
  sightings: 3,
  randomized_mac: 0,
  retention_days: 365,
  live,
  version,
});
const visits = [
  visit(0, 'a', '2026-10-24', 100),
  visit(1, 'a', '2026-10-25', 400),
  visit(2, 'a', '2026-10-25', 1000),
  visit(3, 'b', '2026-10-25', 2000),
  visit(4, 'b', '2026-10-25', 4000, zoneId),
  // Rewritten by a later recomputation: the newest version counts (dwell 10 s, not 5,000 s).
  visit(5, 'c', '2026-10-25', 5000, '', 1, 1),
  visit(5, 'c', '2026-10-25', 10, '', 1, 2),
  // Removed by a later recomputation.
  visit(6, 'd', '2026-10-26', 700, '', 1, 1),
  visit(6, 'd', '2026-10-26', 700, '', 0, 2),
];
const point = (minute: number, value: number, live = 1, version = 1): DerivedOccupancyRow => ({
  operator_id: operatorId,
  venue_id: venueId,
  ts: base / 1000 + minute * 60,
  ts_ms: 0,
  local_day: '2026-10-24',
  value,
  retention_days: 365,
  live,
  version,
});
const points = [point(0, 0), point(10, 4), point(20, 6, 1, 1), point(20, 8, 1, 2), point(30, 99, 1, 1), point(30, 99, 0, 2), point(70, 2)];
const health: HealthRow[] = ['offline', 'healthy'].map((status, i) => ({
  operator_id: operatorId,
  venue_id: venueId,
  integration_id: integrationId,
  connector_type: 'meraki',
  status,
  previous: i === 0 ? '' : 'offline',
  transition: 1,
  last_event_at: i === 0 ? 0 : base / 1000,
  has_last_event: i,
  rejection_rate: 0,
  reason: 'ok',
  ts: base / 1000 + i,
  ts_ms: 0,
  ...sunk(200 + i),
}));

const insert = async (e: ChExecutor, table: string, rows: object[]) =>
  e.exec(`INSERT INTO ${table} FORMAT JSONEachRow\n${rows.map((r) => JSON.stringify(r)).join('\n')}`);

beforeAll(async () => {
  chdb = openChdb();
  await migrateClickhouse(chdb.engine, 'default');
  server = createCh(testConfig());
  engines.push(chdb.engine, serverExecutor(server));
  const reported = toRow(
    event({ operatorId, venueId, ts: base, type: 'occupancy', metrics: { occupancy: 33 } }),
    { topic, partition: 1, offset: '0', index: 0 },
    { timezone: 'UTC', retentionDays: 365 },
  );
  await chdb.engine.exec(`INSERT INTO events FORMAT JSONEachRow\n${JSON.stringify(reported)}`);
  await insertEvents(server, [reported]);
  for (const e of engines) {
    await insert(e, 'occupancy_updates', occupancy);
    await insert(e, 'derived_visits', visits);
    await insert(e, 'derived_occupancy', points);
    await insert(e, 'connector_health', health);
    await insert(
      e,
      'derived_zone_occupancy',
      [point(0, 0), point(5, 3), point(6, 5, 1, 1), point(6, 1, 1, 2)].map((p) => ({ ...p, zone_id: zoneId })),
    );
  }
});

afterAll(async () => {
  chdb.close();
  await server.close();
});

async function onBoth<T>(statement: ChSql): Promise<T[]> {
  const [current, old] = await Promise.all(engines.map((e) => e.query<T>(statement.text)));
  expect(current, 'chdb and 18.16 agree').toEqual(old);
  return current!;
}

describe('the derived tables and queries on current ClickHouse and on 18.16', () => {
  it('read the occupancy key from the derived history (newest version per instant), and a connector count from occupancy_reported', async () => {
    const plan = {
      operatorId,
      venueId,
      agg: 'SUM' as const,
      resolution: '1h' as const,
      fromSec: base / 1000 - 3600,
      toSec: base / 1000 + 7200,
      bucketSec: 3600,
    };
    const rows = await onBoth<{ key: string; t: number; value: number }>(
      telemetrySeriesSql({ ...plan, keys: ['occupancy', 'occupancy_reported'] }),
    );
    expect(rows.map((r) => [r.key, Number(r.t), Number(r.value)])).toEqual([
      ['occupancy', base / 1000, 12],
      ['occupancy', base / 1000 + 3600, 2],
      ['occupancy_reported', base / 1000, 33],
    ]);
    // One area zone's own history (newest version per instant).
    const zone = await onBoth<{ key: string; t: number; value: number }>(
      telemetrySeriesSql({ ...plan, agg: 'MAX', keys: ['occupancy'], zoneId }),
    );
    expect(zone.map((r) => [r.key, Number(r.t), Number(r.value)])).toEqual([['occupancy', base / 1000, 3]]);
    const hours = await onBoth<{ t: number; mean: number; last: number; last_at: number }>(
      occupancyHoursSql({ operatorId, venueId, fromSec: base / 1000 - 3600, toSec: base / 1000 + 7200 }),
    );
    expect(hours.map((r) => [Number(r.t), Number(r.mean), Number(r.last), Number(r.last_at)])).toEqual([
      [base / 1000, 4, 8, base / 1000 + 1200],
      [base / 1000 + 3600, 2, 2, base / 1000 + 4200],
    ]);
  });

  it('give the figures a partial recomputation continues from: the last live point of the venue and of each zone before an instant', async () => {
    const q = { operatorId, venueId, fromMs: base };
    const at = (minute: number) => String(base + minute * 60_000);
    // Minute 30's 99 is no longer live (version 2); minute 20 holds its newest version, 8.
    expect(await onBoth(occupancyBeforeSql({ ...q, beforeMs: base + 65 * 60_000 }))).toEqual([
      { zone_id: '', last_at: at(20), last_value: 8 },
      { zone_id: zoneId, last_at: at(6), last_value: 1 },
    ]);
    expect(await onBoth(occupancyBeforeSql({ ...q, beforeMs: base + 6 * 60_000 }))).toEqual([
      { zone_id: '', last_at: at(0), last_value: 0 },
      { zone_id: zoneId, last_at: at(5), last_value: 3 },
    ]);
    expect(await onBoth(occupancyBeforeSql({ ...q, beforeMs: base }))).toEqual([{ zone_id: '', last_at: '0', last_value: 0 }]);
  });

  it('answer the current figure per zone, dwell buckets, mean dwell, visit days and latest health', async () => {
    const current = await onBoth<{ zone_id: string; value: number; at: string }>(currentOccupancySql({ operatorId, venueId }));
    expect(current.map((r) => [r.zone_id, Number(r.value), Number(r.at)])).toEqual([
      ['', 2, base + 1_200_000],
      [zoneId, 9, base + 1_800_000],
    ]);
    const range = { fromMs: base, toMs: base + 3_600_000, nowMs: base + 36_000_000 };
    const dwell = await onBoth<{ zone_id: string; bucket: number; visits: number }>(dwellHistogramSql({ operatorId, venueId, ...range }));
    expect(dwell.map((r) => [r.zone_id, r.bucket, r.visits])).toEqual([
      ['', 0, 2],
      ['', 1, 1],
      ['', 2, 1],
      ['', 3, 1],
      [zoneId, 4, 1],
    ]);
    // Visits not yet closed at nowMs are not in dwell.
    const early = await onBoth<{ zone_id: string; bucket: number; visits: number }>(
      dwellHistogramSql({ operatorId, venueId, ...range, nowMs: base + 1_400_000 }),
    );
    expect(early.map((r) => [r.zone_id, r.bucket, r.visits])).toEqual([
      ['', 0, 2],
      ['', 1, 1],
    ]);
    const [avg] = await onBoth<{ avg_dwell: number }>(averageDwellSql({ operatorId, ...range }));
    expect(avg!.avg_dwell).toBe((100 + 400 + 1000 + 2000 + 10) / 5);
    const days = await onBoth<{ days: number; devices: number }>(
      visitDaysSql({ operatorId, venueId, fromDay: '2026-10-01', toDay: '2026-10-31' }),
    );
    expect(days.map((r) => [r.days, r.devices])).toEqual([
      [1, 2],
      [2, 1],
    ]);
    const latest = await onBoth<{ integration_id: string; status: string; has_last_event: number }>(
      latestHealthSql({ operatorId, integrationIds: [integrationId], sinceSec: 0 }),
    );
    expect(latest.map((r) => [r.integration_id, r.status, r.has_last_event])).toEqual([[integrationId, 'healthy', 1]]);
  });

  it("answer the portfolio's figures per venue: current occupancy, events and mean dwell in each venue's own window", async () => {
    const elsewhere = randomUUID();
    const [now] = await onBoth<{ venue_id: string; value: number; at: number }>(
      venueOccupanciesSql({ operatorId, venueIds: [venueId, elsewhere] }),
    );
    expect([now!.venue_id, Number(now!.value), Number(now!.at)]).toEqual([venueId, 2, base + 1_200_000]);
    const windows = [
      { venueId, fromMs: base - 1000 },
      { venueId: elsewhere, fromMs: base - 3_600_000 },
    ];
    const events = await onBoth<{ venue_id: string; events: number }>(eventsInWindowsSql({ operatorId, windows, toSec: base / 1000 + 10 }));
    expect(events.map((r) => [r.venue_id, Number(r.events)])).toEqual([[venueId, 1]]);
    // A window starting after the event leaves it out.
    expect(await onBoth(eventsInWindowsSql({ operatorId, windows: [{ venueId, fromMs: base + 1000 }], toSec: base / 1000 + 10 }))).toEqual(
      [],
    );
    const dwell = await onBoth<{ venue_id: string; avg_dwell: number }>(
      dwellInWindowsSql({ operatorId, windows: [{ venueId, fromMs: base }], nowMs: base + 36_000_000 }),
    );
    expect(dwell.map((r) => [r.venue_id, Number(r.avg_dwell)])).toEqual([[venueId, (100 + 400 + 1000 + 2000 + 10) / 5]]);
  });

  it('read sightings as sorted keys per scope and device (only devices seen in the marked range), which cut into visits: a gap over 15 minutes or a departure ends one, passers-by are left out', async () => {
    const at = (name: string, minute: number, type: 'device_seen' | 'device_left' = 'device_seen', zone: string | null = null) =>
      toRow(
        event({ operatorId, venueId, ts: base + minute * 60_000, type, device: deviceId(name), zoneId: zone }),
        { topic, partition: 2, offset: String(minute * 10 + name.length), index: 0 },
        { timezone: 'UTC', retentionDays: 365 },
      );
    const v = 'chdb-visitor';
    const sightings = [
      at(v, 0, 'device_seen', zoneId),
      at(v, 5, 'device_seen', zoneId),
      at(v, 30),
      at(v, 32),
      at(v, 33, 'device_left'),
      at(v, 35),
      at(v, 51, 'device_seen', zoneId),
      at('chdb-other', 10),
      at('chdb-other', 14),
    ];
    await chdb.engine.exec(`INSERT INTO events FORMAT JSONEachRow\n${sightings.map((r) => JSON.stringify(r)).join('\n')}`);
    await insertEvents(server, sightings);
    const visits = async (seenFromMs: number, seenToMs: number) => {
      const keys = await onBoth<ScopeKeys>(
        chsql`SELECT * FROM (${sightingKeysSql({ operatorId, venueId, fromMs: base, toMs: base + 50 * 60_000, seenFromMs, seenToMs, baseMs: base })})
               ORDER BY zone_id, device`,
      );
      return keys.flatMap((k) =>
        foldRuns(undefined, k.keys, base, base)
          .runs.filter(qualifies)
          .map((r) => [k.zone_id, r.start - base, r.last - base, closesAt(r, base + 50 * 60_000) - base, r.sightings]),
      );
    };
    const visitor = [
      ['', 0, 300_000, 1_200_000, 2],
      ['', 1_800_000, 1_980_000, 1_980_000, 3],
      [zoneId, 0, 300_000, 1_200_000, 2],
    ];
    const sorted = (rows: unknown[][]) => rows.map((r) => JSON.stringify(r)).sort();
    expect(sorted(await visits(base, base + 50 * 60_000))).toEqual(sorted([...visitor, ['', 600_000, 840_000, 1_740_000, 2]]));
    // Marked 30 to 33 minutes in: the visitor was seen then (all of its visits), the other device was not.
    expect(sorted(await visits(base + 30 * 60_000, base + 33 * 60_000))).toEqual(sorted(visitor));
  });

  it("read a period's visit checkpoint (and whether a state is newer than it) and the newest state per scope and device", async () => {
    const day = '2026-10-24';
    const state = (zone: string, device: string, cp: number, start: number, version: number) => ({
      operator_id: operatorId,
      venue_id: venueId,
      day,
      zone_id: zone,
      device,
      cp_ms: base + cp,
      start_ms: base + start,
      last_ms: base + start + 60_000,
      departed: 0,
      sightings: 4,
      randomized_mac: 1,
      retention_days: 365,
      version,
    });
    const d = deviceId('chdb-stateful');
    const seen = toRow(
      event({ operatorId, venueId, ts: base + 60_000, type: 'device_seen', device: d }),
      { topic, partition: 3, offset: '0', index: 0 },
      { timezone: 'UTC', retentionDays: 365 },
    );
    await chdb.engine.exec(`INSERT INTO events FORMAT JSONEachRow\n${JSON.stringify(seen)}`);
    await insertEvents(server, [seen]);
    for (const e of engines)
      await insert(e, 'derived_visit_state', [
        state('', d, 1000, 0, 5),
        state('', d, 2000, 500, 7),
        state('', '', 2000, 0, 7),
        state(zoneId, d, 1000, 0, 5),
      ]);
    const [checkpoint] = await onBoth<Record<string, string>>(visitCheckpointSql({ operatorId, venueId, day }));
    expect(checkpoint).toEqual({ cp_ms: String(base + 2000), cp_version: '7', newest: '7' });
    for (const e of engines) await insert(e, 'derived_visit_state', [state(zoneId, d, 3000, 0, 9)]);
    const [interrupted] = await onBoth<Record<string, string>>(visitCheckpointSql({ operatorId, venueId, day }));
    expect(interrupted).toEqual({ cp_ms: String(base + 2000), cp_version: '7', newest: '9' });
    const states = await onBoth<Record<string, string | number>>(
      chsql`SELECT zone_id, toString(start_ms) AS start FROM (${visitStatesSql({ operatorId, venueId, day, fromMs: base, toMs: base + 3_600_000, seenFromMs: base, seenToMs: base + 3_600_000 })})
             ORDER BY zone_id`,
    );
    expect(states).toEqual([
      { zone_id: '', start: String(base + 500) },
      { zone_id: zoneId, start: String(base) },
    ]);
  });

  it("mark an insert's sightings and its door flows apart, each with the event times it spans", async () => {
    const marked = randomUUID();
    const at = (minute: number, type: EventType, metrics: Record<string, number> = {}) =>
      toRow(
        event({
          operatorId,
          venueId: marked,
          ts: base + minute * 60_000,
          type,
          device: type.startsWith('device') ? deviceId('m') : undefined,
          metrics,
        }),
        { topic, partition: 3, offset: String(minute), index: 0 },
        { timezone: 'UTC', retentionDays: 365 },
      );
    // One insert: two sightings, two door flows, and a reading that marks nothing.
    const rows = [
      at(0, 'device_seen'),
      at(9, 'device_left'),
      at(3, 'entry', { entries: 1 }),
      at(5, 'exit', { exits: 1 }),
      at(4, 'environment', { temperature: 21 }),
    ];
    await chdb.engine.exec(`INSERT INTO events FORMAT JSONEachRow\n${rows.map((r) => JSON.stringify(r)).join('\n')}`);
    await insertEvents(server, rows);
    const marks = await onBoth<{ kind: number; min_ts: number; max_ts: number }>(
      chsql`SELECT kind, toInt32(toUInt32(min_ts) - ${base / 1000}) AS min_ts, toInt32(toUInt32(max_ts) - ${base / 1000}) AS max_ts
              FROM derive_marks WHERE venue_id = toUUID(${marked}) ORDER BY kind`,
    );
    expect(marks.map((m) => [Number(m.kind), Number(m.min_ts), Number(m.max_ts)])).toEqual([
      [MARK_KIND.sightings, 0, 540],
      [MARK_KIND.flows, 180, 300],
    ]);
  });

  it('partition the derived tables for the retention job', async () => {
    const parts = await engines[0]!.query<{ table: string; partition_id: string }>(activePartitionsSql().text);
    for (const table of ['occupancy_updates', 'connector_health', 'derived_visits', 'derived_occupancy']) {
      expect(
        parts.some((p) => p.table === table && /^365-\d{6,8}$/.test(p.partition_id)),
        table,
      ).toBe(true);
    }
  });
});
