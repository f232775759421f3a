import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql } from '../../clickhouse/client.js';
import type { CanonicalEvent } from '../../lib/events.js';
import { venueDwell } from '../../domain/analytics/dwell.js';
import { percentages, visitorScoring } from '../../domain/analytics/scoring.js';
import { dashboardStats } from '../../domain/dashboard/dashboard.js';
import { localDayNumber, localDayStart } from '../../domain/telemetry/calendar.js';
import type { RunningProcessors } from '../../pipeline/processors/run.js';
import { createVisitsProcessor } from '../../pipeline/processors/visits.js';
import type { Queryable } from '../../postgres/client.js';
import { committedToEnd, deviceId, event, newVenue, openProcHarness, produce, startProcessors, waitFor, type ProcHarness } from './harness.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;

let h: ProcHarness;
let run: RunningProcessors;
const now = Date.now();
const T = Math.floor((now - 3 * HOUR) / MINUTE) * MINUTE;
let shop: Awaited<ReturnType<typeof newVenue>>;
let berlin: Awaited<ReturnType<typeof newVenue>>;
let stranger: Awaited<ReturnType<typeof newVenue>>;
let empty: Awaited<ReturnType<typeof newVenue>>;
let crowd: Awaited<ReturnType<typeof newVenue>>;
/** More devices than one Kafka send takes (lib/kafka.ts MAX_MESSAGES_PER_SEND): their state changes and visits span several sends of one transaction. */
const CROWD = 1200;

/** Sightings of one device at minute offsets from `from`. */
function seen(v: { operatorId: string; venueId: string }, name: string, from: number, minutes: number[], extra: Partial<CanonicalEvent> = {}): CanonicalEvent[] {
  return minutes.map((m) => event({ operatorId: v.operatorId, venueId: v.venueId, ts: from + m * MINUTE, type: 'device_seen', device: deviceId(name), ...extra }));
}

beforeAll(async () => {
  h = await openProcHarness();
  shop = await newVenue(h.db, { zones: [{ slug: 'aisle', type: 'area' }] });
  berlin = await newVenue(h.db, { timezone: 'Europe/Berlin' });
  stranger = await newVenue(h.db);
  empty = await newVenue(h.db);
  crowd = await newVenue(h.db);
  const events: CanonicalEvent[] = [
    // 14 minutes, never unseen for 15: one visit (also one in the aisle).
    ...seen(shop, 'd1', T, [0, 5, 10, 14], { zoneId: shop.zones.aisle! }),
    // Unseen for 16 minutes: two visits, 3 and 6 minutes.
    ...seen(shop, 'd2', T, [0, 3, 19, 25]),
    // Unseen for exactly the gap: still one visit of 15 minutes.
    ...seen(shop, 'd3', T, [0, 15]),
    // Passers-by: one sighting; one minute.
    ...seen(shop, 'd4', T, [7]),
    ...seen(shop, 'd5', T, [0, 1]),
    // An hour of sightings, then a departure a minute later.
    ...seen(shop, 'd6', T, [0, 10, 20, 30, 40, 50, 60]),
    event({ operatorId: shop.operatorId, venueId: shop.venueId, ts: T + 61 * MINUTE, type: 'device_left', device: deviceId('d6') }),
  ];
  // Loyalty: devices seen on 1, 3, 5 and 9 local days, and one just after local midnight six days ago.
  const today = localDayNumber(now, 'Europe/Berlin');
  const noon = (daysAgo: number) => localDayStart(today - daysAgo, 'Europe/Berlin') + 12 * HOUR;
  const days = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
  for (const [name, n] of [['A', 1], ['B', 3], ['C', 5], ['D', 9]] as const) {
    for (const d of days(n)) events.push(...seen(berlin, name, noon(d), [0, 5]));
  }
  events.push(...seen(berlin, 'H', localDayStart(today - 6, 'Europe/Berlin') + 10 * MINUTE, [0, 10]));
  for (let i = 0; i < CROWD; i++) events.push(...seen(crowd, `crowd-${i}`, T, [0, 2]));
  events.sort((a, b) => a.ts - b.ts);
  await produce(h, events);
  run = await startProcessors(h, ['visits']);
  await committedToEnd(h.admin, `${h.prefix}.proc.visits`, h.topics.events);
  // The last visits close on the wall clock once the processor has read everything.
  await waitFor('the last visits', async () => {
    const [row] = await chRows<{ n: number }>(h.ch, chsql`SELECT toUInt32(count()) AS n FROM visits WHERE venue_id = toUUID(${berlin.venueId})`);
    return row!.n >= 1 + 3 + 5 + 9 + 1;
  });
  await waitFor('the crowd', async () => {
    const [row] = await chRows<{ n: number }>(h.ch, chsql`SELECT toUInt32(count()) AS n FROM visits WHERE venue_id = toUUID(${crowd.venueId})`);
    return row!.n >= CROWD;
  });
  await committedToEnd(h.admin, `${h.prefix}.sink.visits`, h.derived.visits);
});

afterAll(async () => {
  await run?.stop();
  await h.close();
});

describe('visits processor', () => {
  it('splits a visit after the gap, not at it, and drops passers-by', async () => {
    const rows = await chRows<{ device: string; zone_id: string; start: number; dwell: number; sightings: number }>(
      h.ch,
      chsql`SELECT device, zone_id, toUInt32(ts) AS start, dwell_seconds AS dwell, sightings FROM visits
             WHERE venue_id = toUUID(${shop.venueId}) ORDER BY device, zone_id, start`,
    );
    const of = (name: string, zone = '') => rows.filter((r) => r.device === deviceId(name) && r.zone_id === zone).map((r) => [r.dwell / 60, r.sightings]);
    expect(of('d1')).toEqual([[14, 4]]);
    expect(of('d1', shop.zones.aisle)).toEqual([[14, 4]]);
    expect(of('d2')).toEqual([
      [3, 2],
      [6, 2],
    ]);
    expect(of('d3')).toEqual([[15, 2]]);
    expect(of('d4')).toEqual([]);
    expect(of('d5')).toEqual([]);
    expect(of('d6')).toEqual([[61, 8]]);
  });

  it('stores every visit of a crowd once, though one batch changes more entries than one Kafka send takes', async () => {
    const [row] = await chRows<{ visits: number; devices: number; dwell: number }>(
      h.ch,
      chsql`SELECT toUInt32(count()) AS visits, toUInt32(uniqExact(device)) AS devices, toUInt32(max(dwell_seconds)) AS dwell
              FROM visits WHERE venue_id = toUUID(${crowd.venueId})`,
    );
    expect(row).toEqual({ visits: CROWD, devices: CROWD, dwell: 120 });
  });

  it('answers the dwell histogram of the venue and each zone', async () => {
    const got = await venueDwell(h, shop.operatorId, { id: shop.venueId, range: '24h' });
    expect(got.zones).toEqual([
      {
        zone_id: 'default',
        zone_name: 'Entire Venue',
        buckets: [
          { range: '0-5m', count: 1 },
          { range: '5-15m', count: 2 },
          { range: '15-30m', count: 1 },
          { range: '30-60m', count: 0 },
          { range: '60m+', count: 1 },
        ],
      },
      {
        zone_id: shop.zones.aisle,
        zone_name: 'Zone aisle',
        buckets: [
          { range: '0-5m', count: 0 },
          { range: '5-15m', count: 1 },
          { range: '15-30m', count: 0 },
          { range: '30-60m', count: 0 },
          { range: '60m+', count: 0 },
        ],
      },
    ]);
    // 7d is the default range.
    expect(await venueDwell(h, shop.operatorId, { id: shop.venueId })).toEqual(got);
  });

  it('makes avgDwellSeconds the mean whole-venue dwell of the last 24 hours', async () => {
    const stats = await dashboardStats(h, shop.operatorId);
    expect(stats.avgDwellSeconds).toBe(((14 + 3 + 6 + 15 + 61) * 60) / 5);
    expect((await dashboardStats(h, empty.operatorId)).avgDwellSeconds).toBe(0);
  });

  it('segments devices by distinct local visit days, all four segments, percentages summing to 100', async () => {
    const month = await visitorScoring(h, berlin.operatorId, { id: berlin.venueId });
    expect(month).toEqual({
      segments: [
        { name: 'New', count: 2, percentage: 40 },
        { name: 'Returning', count: 1, percentage: 20 },
        { name: 'Regular', count: 1, percentage: 20 },
        { name: 'Loyal', count: 1, percentage: 20 },
      ],
      total: 5,
      range: '30d',
    });
    // Six local days back starts at local midnight: H's visit at 00:10 local (23:10 UTC the day before) is in.
    const week = await visitorScoring(h, berlin.operatorId, { id: berlin.venueId, range: '7d' });
    expect(week.segments.map((s) => [s.name, s.count, s.percentage])).toEqual([
      ['New', 2, 40],
      ['Returning', 1, 20],
      ['Regular', 2, 40],
      ['Loyal', 0, 0],
    ]);
    const none = await visitorScoring(h, empty.operatorId, { id: empty.venueId, range: '90d' });
    expect(none).toEqual({
      segments: ['New', 'Returning', 'Regular', 'Loyal'].map((name) => ({ name, count: 0, percentage: 0 })),
      total: 0,
      range: '90d',
    });
  });

  it('keeps an open visit in a 38-byte changelog entry, and still restores entries written as JSON', () => {
    // restore and entry touch no database.
    const p = createVisitsProcessor({ db: null as unknown as Queryable, inputTopic: 'in', outputTopic: 'out' });
    const open = { o: shop.operatorId, v: shop.venueId, z: shop.zones.aisle!, d: deviceId('entry'), r: true, first: T + 0.5, last: T + 14 * MINUTE, n: 123_456 };
    const key = `${open.v}|${open.z}|${open.d}`;
    const venueKey = `${open.v}||${open.d}`;
    const legacy = p.createState();
    p.restore(legacy, key, Buffer.from(JSON.stringify(open)));
    p.restore(legacy, venueKey, Buffer.from(JSON.stringify({ ...open, z: null, r: false })));
    const entry = p.entry(legacy, key)!;
    expect(entry.length).toBe(38);
    const restored = p.createState();
    p.restore(restored, key, entry);
    p.restore(restored, venueKey, p.entry(legacy, venueKey));
    expect([...restored.open]).toEqual([[key, open], [venueKey, { ...open, z: null, r: false }]]);
    p.restore(restored, key, null);
    expect([...restored.open.keys()]).toEqual([venueKey]);
    expect(p.entry(restored, key)).toBeNull();
  });

  it('rounds percentages so they always sum to 100', () => {
    for (const counts of [[1, 1, 1, 0], [2, 1, 1, 3], [1, 0, 0, 0], [7, 11, 13, 17]]) {
      const pct = percentages(counts);
      expect(Math.round(pct.reduce((a, b) => a + b, 0) * 100)).toBe(10_000);
    }
    expect(percentages([1, 1, 1, 0])).toEqual([33.34, 33.33, 33.33, 0]);
  });

  it('refuses another operator (403) and an unknown venue (404)', async () => {
    for (const call of [
      () => venueDwell(h, stranger.operatorId, { id: shop.venueId }),
      () => visitorScoring(h, stranger.operatorId, { id: berlin.venueId }),
    ]) {
      await expect(call()).rejects.toMatchObject({ status: 403, code: 'FORBIDDEN' });
    }
    await expect(venueDwell(h, shop.operatorId, { id: '00000000-0000-4000-8000-000000000000' })).rejects.toMatchObject({ status: 404 });
  });
});
