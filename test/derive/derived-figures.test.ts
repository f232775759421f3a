import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCh, type Ch } from '../../clickhouse/client.js';
import { saveProgress, serverNow } from '../../clickhouse/queries/derive.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { venueDwell } from '../../domain/analytics/dwell.js';
import { predictOccupancy } from '../../domain/analytics/predictions.js';
import { visitorScoring } from '../../domain/analytics/scoring.js';
import { getTelemetry } from '../../domain/telemetry/telemetry.js';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { createLogger } from '../../lib/logger.js';
import { startDeriveJob, type RunningDerive } from '../../pipeline/derive/job.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { createDb, type Db } from '../../postgres/client.js';
import { testConfig } from '../support/env.js';
import { telemetrySeries } from '../support/telemetry.js';
import { deviceId, event, newVenue } from '../processors/harness.js';
import {
  DAY,
  HOUR,
  MINUTE,
  localDate,
  oracleDwell,
  oracleMeans,
  oracleOccupancy,
  oraclePrediction,
  oracleScoring,
  oracleVisits,
  shuffled,
  type DoorEvent,
  type Sighting,
} from './oracle.js';

/**
 * Dwell, loyalty, the occupancy history (telemetry key `occupancy`) and predictions are a function
 * of the stored events alone: generated sightings and door flows over three local days (a DST day
 * included) reach the raw table shuffled, in random pieces, beside another operator's live
 * traffic, with derive rounds in between; every answer equals an independent recomputation
 * (test/derive/oracle.ts) from the same events.
 */
const TZ = 'Europe/Berlin';
const RESET = 4;
/** Saturday 2026-10-24 00:00 in Berlin (CEST); the clocks go back on Sunday the 25th. */
const BASE = Date.UTC(2026, 9, 23, 22, 0);
const NOW = BASE + 3 * DAY + 10 * HOUR;

let ch: Ch;
let db: Db;
let job: RunningDerive;

beforeAll(async () => {
  const cfg = testConfig();
  ch = createCh(cfg);
  db = createDb(cfg, 4);
  const name = `derive-test-${randomUUID().slice(0, 8)}`;
  // Its own cursor, starting now: the first round reads new marks only (no rebuild of the shared test database).
  await saveProgress(ch, name, await serverNow(ch), Date.now());
  job = startDeriveJob({ ch, db, log: createLogger('derive-test', cfg.LOG_LEVEL), intervalMs: 3_600_000, name });
});

afterAll(async () => {
  await job.stop();
  await ch.close();
  await db.end();
});

const visitArb = fc.record({
  device: fc.integer({ min: 0, max: 5 }),
  start: fc.integer({ min: 0, max: 3 * 24 * 60 - 1 }),
  sightings: fc.integer({ min: 1, max: 8 }),
  step: fc.integer({ min: 1, max: 20 }),
  inHall: fc.boolean(),
  leaves: fc.boolean(),
});
const doorArb = fc.record({
  minute: fc.integer({ min: 0, max: 3 * 24 * 60 - 1 }),
  second: fc.integer({ min: 0, max: 59 }),
  kind: fc.constantFrom('entry', 'entry', 'exit', 'exit', 'count'),
  amount: fc.integer({ min: 1, max: 4 }),
  zone: fc.constantFrom('none', 'door', 'hall'),
});
const deliveryArb = fc.record({
  seed: fc.integer(),
  pieces: fc.integer({ min: 1, max: 6 }),
  roundsAfter: fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
});

const insert = (events: CanonicalEvent[]) =>
  insertEvents(
    ch,
    events.map((e, i) =>
      toRow(e, { topic: 'derive-test', partition: 0, offset: String(i), index: 0 }, { timezone: TZ, retentionDays: 365 }),
    ),
  );

const seen = { visits: 0, points: 0, hallPoints: 0 };

describe('figures derived from the raw table', () => {
  it('equal an independent recomputation whatever the delivery order, pieces and neighbours', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(visitArb, { minLength: 2, maxLength: 10 }),
        fc.array(doorArb, { minLength: 5, maxLength: 30 }),
        deliveryArb,
        async (visits, doors, delivery) => {
          const a = await newVenue(db, {
            timezone: TZ,
            resetHour: RESET,
            zones: [
              { slug: 'door', type: 'entrance' },
              { slug: 'hall', type: 'area', capacity: 30 },
            ],
          });
          const b = await newVenue(db, { timezone: 'UTC', zones: [{ slug: 'door', type: 'entrance' }] });
          const mine = { operatorId: a.operatorId, venueId: a.venueId };
          const sightings: Sighting[] = [];
          const events: CanonicalEvent[] = [];
          for (const v of visits) {
            for (let i = 0; i < v.sightings; i++) {
              const ts = BASE + (v.start + i * v.step) * MINUTE + 7_000;
              const left = v.leaves && i === v.sightings - 1;
              const device = deviceId(`oracle-${a.venueId}-${v.device}`);
              const zone = v.inHall ? a.zones.hall! : null;
              sightings.push({ ts, device, zone, left });
              events.push(event({ ...mine, ts, type: left ? 'device_left' : 'device_seen', device, zoneId: zone }));
            }
          }
          const flows: DoorEvent[] = [];
          for (const d of doors) {
            const ts = BASE + d.minute * MINUTE + d.second * 1000;
            const e = event({
              ...mine,
              ts,
              connectorType: 'density',
              type: d.kind === 'count' ? 'occupancy' : d.kind,
              zoneId: d.zone === 'none' ? null : a.zones[d.zone]!,
              metrics: d.kind === 'count' ? { occupancy: d.amount * 3 } : d.kind === 'entry' ? { entries: d.amount } : { exits: d.amount },
            });
            flows.push({ ts, id: e.id, kind: d.kind, amount: d.kind === 'count' ? d.amount * 3 : d.amount, forVenue: d.zone !== 'hall' });
            events.push(e);
          }
          // Another operator's live venue: newer event times, on the same tables, in every piece.
          const neighbour = Array.from({ length: 12 }, (_, i) =>
            event({
              operatorId: b.operatorId,
              venueId: b.venueId,
              ts: NOW - i * MINUTE,
              type: i % 3 ? 'device_seen' : 'exit',
              device: i % 3 ? deviceId(`n-${i % 2}`) : null,
              metrics: i % 3 ? {} : { exits: 2 },
            }),
          );
          const order = shuffled(events, delivery.seed);
          const size = Math.ceil(order.length / delivery.pieces) || 1;
          for (let i = 0, piece = 0; i < order.length; i += size, piece++) {
            await insert([...order.slice(i, i + size), ...neighbour.slice(piece * 2, piece * 2 + 2)]);
            if (delivery.roundsAfter[piece]) await job.runOnce();
          }
          await job.runOnce();
          expect(job.stats.failures, 'no failed derive round').toBe(0);

          const deps = { db, ch };
          const expectedVisits = oracleVisits(sightings, RESET, TZ);
          seen.visits += expectedVisits.length;
          for (const range of ['7d', '24h'] as const) {
            const dwell = await venueDwell(deps, a.operatorId, { id: a.venueId, range }, NOW);
            const want = oracleDwell(expectedVisits, NOW, range === '7d' ? 7 : 1);
            expect(
              dwell.zones.map((z) => [z.zone_id, z.buckets.map((x) => x.count)]),
              `dwell ${range}`,
            ).toEqual([
              ['default', want.get('') ?? [0, 0, 0, 0, 0]],
              [a.zones.door!, [0, 0, 0, 0, 0]],
              [a.zones.hall!, want.get(a.zones.hall!) ?? [0, 0, 0, 0, 0]],
            ]);
          }
          const scoring = await visitorScoring(deps, a.operatorId, { id: a.venueId, range: '7d' }, NOW);
          expect(
            scoring.segments.map((s) => s.count),
            'scoring',
          ).toEqual(oracleScoring(expectedVisits, NOW, 7, RESET, TZ));

          const points = oracleOccupancy(flows, RESET, TZ);
          seen.points += points.length;
          const doc = await telemetrySeries(deps, a.operatorId, a.venueId, {
            keys: ['occupancy', 'entries'],
            startTs: BASE - DAY,
            endTs: NOW,
            interval: HOUR,
            agg: 'AVG',
            fill: 'none',
          });
          const wantHourly = [...oracleMeans(points, (ts) => Math.floor(ts / HOUR) * HOUR)].sort((x, y) => Number(x[0]) - Number(y[0]));
          expect(
            doc.occupancy!.map((p) => [p.ts, round(p.value)]),
            'occupancy by hour',
          ).toEqual(wantHourly.map(([t, v]) => [t, round(v)]));
          const daily = (await getTelemetry(deps, a.operatorId, a.venueId, {
            keys: ['occupancy'],
            startTs: BASE - DAY,
            endTs: NOW + DAY,
            interval: DAY,
            agg: 'MAX',
            fill: 'none',
          })) as Record<string, Array<{ ts: number; value: number }>>;
          const maxByDay = new Map<string, number>();
          for (const p of points) maxByDay.set(localDate(p.ts, TZ), Math.max(maxByDay.get(localDate(p.ts, TZ)) ?? 0, p.value));
          expect(
            daily.occupancy!.map((p) => [localDate(p.ts, TZ), p.value]),
            'occupancy max by local day',
          ).toEqual([...maxByDay].sort());

          // The hall (an area zone) has its own history, from its own flows alone.
          const hallPoints = oracleOccupancy(
            flows.filter((f) => !f.forVenue).map((f) => ({ ...f, forVenue: true })),
            RESET,
            TZ,
          );
          seen.hallPoints += hallPoints.length;
          const hallDoc = await telemetrySeries(deps, a.operatorId, a.venueId, {
            keys: ['occupancy'],
            startTs: BASE - DAY,
            endTs: NOW,
            interval: MINUTE,
            agg: 'MAX',
            fill: 'none',
            zoneId: a.zones.hall!,
          });
          const hallByMinute = new Map<number, number>();
          for (const p of hallPoints) {
            const minute = Math.floor(p.ts / MINUTE) * MINUTE;
            hallByMinute.set(minute, Math.max(hallByMinute.get(minute) ?? 0, p.value));
          }
          expect(
            hallDoc.occupancy!.map((p) => [p.ts, p.value]),
            'hall occupancy by minute',
          ).toEqual([...hallByMinute].sort((x, y) => x[0] - y[0]));

          for (const [dayOfWeek, hour] of [
            [6, 12],
            [0, 3],
            [0, 2],
            [1, 9],
          ] as const) {
            const got = await predictOccupancy(
              deps,
              a.operatorId,
              { id: a.venueId, dayOfWeek: String(dayOfWeek), hour: String(hour) },
              NOW,
            );
            expect(got, `prediction ${dayOfWeek} ${hour}`).toEqual(oraclePrediction(points, NOW, dayOfWeek, hour, RESET, TZ));
          }
        },
      ),
      { numRuns: 10 },
    );
    // The generated cases were not all empty.
    expect(seen.visits).toBeGreaterThan(10);
    expect(seen.points).toBeGreaterThan(30);
    expect(seen.hallPoints).toBeGreaterThan(10);
  }, 300_000);
});

const round = (x: number) => Math.round(x * 1e6) / 1e6;
