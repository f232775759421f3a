import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql } from '../../clickhouse/client.js';
import { encodeEventMessages } from '../../lib/events/wire.js';
import { type CanonicalEvent } from '../../lib/events/canonical.js';
import { venueOccupancy } from '../../domain/analytics/occupancy.js';
import type { RunningProcessors } from '../../pipeline/processors/run.js';
import { committedToEnd, event, newVenue, openProcHarness, produce, startProcessors, waitFor, type ProcHarness } from './harness.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

let h: ProcHarness;
let run: RunningProcessors;
const now = Date.now();
// Two hours ago, whole minute; the venue resets 12 hours away from it, so no reset falls in between.
const t = Math.floor((now - 2 * HOUR) / MINUTE) * MINUTE;
const resetHour = (new Date(now).getUTCHours() + 12) % 24;
/** An id derived from a connector's event id (not version 4): the same on every delivery. */
const derivedId = `${randomUUID().slice(0, 14)}5${randomUUID().slice(15)}`;
let shop: Awaited<ReturnType<typeof newVenue>>;
let berlin: Awaited<ReturnType<typeof newVenue>>;
let stranger: Awaited<ReturnType<typeof newVenue>>;

/** The last Sunday of a month (0-based), 00:00 UTC. */
const lastSunday = (year: number, month: number) => {
  const last = Date.UTC(year, month + 1, 0);
  return last - new Date(last).getUTCDay() * DAY;
};
const year = new Date(now).getUTCFullYear();
const spring = [lastSunday(year, 2), lastSunday(year - 1, 2)].find((d) => d <= now - 2 * DAY)!;
const fall = [lastSunday(year, 9), lastSunday(year - 1, 9)].find((d) => d <= now - 2 * DAY)!;

interface UpdateRow {
  zone_id: string;
  ts: number;
  value: number;
  reason: string;
  clamped: number;
  capacity: number | null;
  percent: number | null;
}

async function updates(venueId: string): Promise<UpdateRow[]> {
  return chRows<UpdateRow>(
    h.ch,
    chsql`SELECT zone_id, toUInt64(ts) * 1000 + ts_ms AS ts, value, reason, clamped, capacity, percent FROM occupancy_updates
           WHERE venue_id = toUUID(${venueId}) ORDER BY ts, kafka_partition, kafka_offset`,
  ).then((rows) => rows.map((r) => ({ ...r, ts: Number(r.ts) })));
}

/** Crossings of the `gate` zone in time order (distinct times, within the reorder window), then in the order they arrive. */
let seed = 7;
const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
const gateInOrder: Array<[number, number]> = Array.from({ length: 1_500 }, (_, i) => [
  t + i * 66,
  random() < 0.55 ? 1 + Math.floor(random() * 3) : -1 - Math.floor(random() * 3),
]);
const gateArrivals = [...gateInOrder];
for (let i = gateArrivals.length - 1; i > 0; i--) {
  const j = random() < 0.05 ? Math.floor(random() * i) : Math.max(0, i - Math.floor(random() * 20));
  [gateArrivals[i], gateArrivals[j]] = [gateArrivals[j]!, gateArrivals[i]!];
}

/**
 * Crossings over 90 minutes, most arriving up to 20 places late, one in ten held back to the end:
 * those come 0 to 90 minutes after the newest crossing before them (minutes to an hour late).
 */
const crowdInOrder: Array<[number, number]> = Array.from({ length: 2_700 }, (_, i) => [
  t + i * 2_000,
  random() < 0.55 ? 1 + Math.floor(random() * 3) : -1 - Math.floor(random() * 3),
]);
const crowdHeld = crowdInOrder.filter(() => random() < 0.1);
const crowdArrivals = crowdInOrder.filter((c) => !crowdHeld.includes(c));
for (let i = crowdArrivals.length - 1; i > 0; i--) {
  const j = Math.max(0, i - Math.floor(random() * 20));
  [crowdArrivals[i], crowdArrivals[j]] = [crowdArrivals[j]!, crowdArrivals[i]!];
}
crowdArrivals.push(...crowdHeld);

/** The figure and the clamp total after crossings applied in the order given. */
function replayed(crossings: Array<[number, number]>): { value: number; clamped: number } {
  let value = 0;
  let clamped = 0;
  for (const [, amount] of crossings) {
    value += amount;
    if (value < 0) {
      clamped -= value;
      value = 0;
    }
  }
  return { value, clamped };
}

beforeAll(async () => {
  h = await openProcHarness();
  shop = await newVenue(h.db, {
    resetHour,
    zones: [
      { slug: 'door', type: 'entrance' },
      { slug: 'hall', type: 'area', capacity: 50 },
      { slug: 'till', type: 'counter' },
      { slug: 'lobby', type: 'area' },
      { slug: 'gate', type: 'area' },
      { slug: 'batched', type: 'area' },
      { slug: 'crowd', type: 'area' },
      { slug: 'counted', type: 'area' },
      { slug: 'late', type: 'area' },
      { slug: 'dup', type: 'counter' },
      { slug: 'prev', type: 'area' },
    ],
  });
  berlin = await newVenue(h.db, { timezone: 'Europe/Berlin', resetHour: 4 });
  stranger = await newVenue(h.db, {});
  const at = (ts: number, e: Partial<CanonicalEvent>) => event({ operatorId: shop.operatorId, venueId: shop.venueId, ts, ...e });
  const { door, hall, till, lobby } = shop.zones;
  const events: CanonicalEvent[] = [
    // The venue: door and no-zone events. More exits than entries must never go below 0.
    at(t, { type: 'entry', zoneId: door!, metrics: { entries: 2 } }),
    at(t + MINUTE, { type: 'exit', metrics: { exits: 1 } }),
    at(t + 2 * MINUTE, { type: 'exit', zoneId: door!, metrics: { exits: 3 } }),
    at(t + 3 * MINUTE, { type: 'exit', zoneId: door!, metrics: { exits: 1 } }),
    at(t + 4 * MINUTE, { type: 'entry', metrics: { entries: 3 } }),
    // A counter's count after a crossing (Density): the count re-baselines, not entries + 1.
    at(t + 65 * MINUTE, { type: 'entry', connectorType: 'density', metrics: { entries: 1, occupancy: 7 } }),
    // An area zone with a capacity: flows, an absolute count, more exits than present.
    at(t, { type: 'entry', zoneId: hall!, metrics: { entries: 5 } }),
    at(t + MINUTE, { type: 'occupancy', zoneId: hall!, connectorType: 'density', metrics: { occupancy: 20 } }),
    at(t + 2 * MINUTE, { type: 'exit', zoneId: hall!, metrics: { exits: 30 } }),
    at(t + 3 * MINUTE, { type: 'entry', zoneId: hall!, metrics: { entries: 10 } }),
    at(t, { type: 'entry', zoneId: till!, metrics: { entries: 1 } }),
    // Out of order within the window: the exit (30 s later) arrives before the entry.
    at(t + 30_000, { type: 'exit', zoneId: lobby!, metrics: { exits: 1 } }),
    at(t, { type: 'entry', zoneId: lobby!, metrics: { entries: 1 } }),
    // 1,500 crossings within 100 s arriving shuffled: some a little late, some a lot.
    ...gateArrivals.map(([ts, amount]) =>
      at(
        ts,
        amount > 0
          ? { type: 'entry', zoneId: shop.zones.gate!, metrics: { entries: amount } }
          : { type: 'exit', zoneId: shop.zones.gate!, metrics: { exits: -amount } },
      ),
    ),
    ...crowdArrivals.map(([ts, amount]) =>
      at(
        ts,
        amount > 0
          ? { type: 'entry', zoneId: shop.zones.crowd!, metrics: { entries: amount } }
          : { type: 'exit', zoneId: shop.zones.crowd!, metrics: { exits: -amount } },
      ),
    ),
    // A connector's count arriving ten minutes late: it sets the figure at its time, and the flow after it moves it (2 + 5).
    at(t + 10 * MINUTE, { type: 'entry', zoneId: shop.zones.counted!, metrics: { entries: 5 } }),
    at(t, { type: 'occupancy', zoneId: shop.zones.counted!, connectorType: 'density', metrics: { occupancy: 2 } }),
    // An exit arriving more than an hour late goes to its place: +3, −1, −3 (1 clamped), +2 = 2 (as of now it would leave 1).
    at(t, { type: 'entry', zoneId: shop.zones.late!, metrics: { entries: 3 } }),
    at(t + 5 * MINUTE, { type: 'exit', zoneId: shop.zones.late!, metrics: { exits: 3 } }),
    at(t + 70 * MINUTE, { type: 'entry', zoneId: shop.zones.late!, metrics: { entries: 2 } }),
    at(t + MINUTE, { type: 'exit', zoneId: shop.zones.late!, metrics: { exits: 1 } }),
    // A re-delivered event (its id derived from the connector's event id) counts once; a random id is another event.
    at(t, { id: derivedId, type: 'entry', zoneId: shop.zones.dup!, metrics: { entries: 2 } }),
    at(t, { id: derivedId, type: 'entry', zoneId: shop.zones.dup!, metrics: { entries: 2 } }),
    at(t + MINUTE, { type: 'entry', zoneId: shop.zones.dup!, metrics: { entries: 1 } }),
    // An event of the day before, after today's: not live occupancy (it is in that day's history).
    at(t, { type: 'entry', zoneId: shop.zones.prev!, metrics: { entries: 1 } }),
    at(t - DAY, { type: 'entry', zoneId: shop.zones.prev!, metrics: { entries: 5 } }),
    // Not occupancy: ignored.
    at(t, { type: 'environment', metrics: { temperature: 21 } }),
  ];
  const b = (ts: number, entries: number) =>
    event({ operatorId: berlin.operatorId, venueId: berlin.venueId, ts, type: 'entry', metrics: { entries } });
  const dst = [
    // Spring forward: 04:00 CEST is 02:00 UTC.
    b(spring + 30 * MINUTE, 3),
    b(spring + HOUR + 50 * MINUTE, 1),
    b(spring + 2 * HOUR + 10 * MINUTE, 2),
    // Fall back: 04:00 CET is 03:00 UTC.
    b(fall + 30 * MINUTE, 2),
    b(fall + 2 * HOUR + 30 * MINUTE, 5),
    b(fall + 3 * HOUR + 10 * MINUTE, 1),
  ].sort((x, y) => x.ts - y.ts);
  await produce(h, [...events, ...dst]);
  // Two ingest requests as the api sends them, one message each: three crossings, then one.
  const batched = (ts: number, e: Partial<CanonicalEvent>) => at(ts, { zoneId: shop.zones.batched!, receivedAt: t + 5_000, ...e });
  for (const request of [
    [
      batched(t, { type: 'entry', metrics: { entries: 3 } }),
      batched(t + 1_000, { type: 'exit', metrics: { exits: 5 } }),
      batched(t + 2_000, { type: 'entry', metrics: { entries: 4 } }),
    ],
    [batched(t + 3_000, { type: 'entry', metrics: { entries: 1 } })],
  ]) {
    await h.producer.send({
      topic: h.topics.events,
      acks: -1,
      messages: encodeEventMessages(request).map((m) => ({ key: shop.venueId, ...m })),
    });
  }
  run = await startProcessors(h, ['occupancy']);
  await committedToEnd(h.admin, `${h.prefix}.proc.occupancy`, h.topics.events);
  await committedToEnd(h.admin, `${h.prefix}.sink.occupancy`, h.derived.occupancy);
});

afterAll(async () => {
  await run?.stop();
  await h.close();
});

describe('occupancy processor', () => {
  it('never goes negative under more exits than entries, and records the clamp', async () => {
    const rows = await updates(shop.venueId);
    expect(rows.every((r) => r.value >= 0)).toBe(true);
    const venue = rows.filter((r) => r.zone_id === '');
    expect(venue.map((r) => [r.value, r.reason, r.clamped])).toEqual([
      [2, 'flow', 0],
      [1, 'flow', 0],
      [0, 'flow', 2],
      [0, 'flow', 1],
      [3, 'flow', 0],
      [7, 'count', 0],
    ]);
    const hall = rows.filter((r) => r.zone_id === shop.zones.hall);
    expect(hall.map((r) => [r.value, r.reason, r.clamped, r.percent])).toEqual([
      [5, 'flow', 0, 10],
      [20, 'count', 0, 40],
      [0, 'flow', 10, 0],
      [10, 'flow', 0, 20],
    ]);
    expect(hall.every((r) => r.capacity === 50)).toBe(true);
  });

  it('applies the events of one ingest request together: one update with the figure after them and their clamps', async () => {
    const batched = (await updates(shop.venueId)).filter((r) => r.zone_id === shop.zones.batched);
    expect(batched.map((r) => [r.value, r.reason, r.clamped, r.ts])).toEqual([
      [4, 'flow', 2, t + 2_000],
      [5, 'flow', 0, t + 3_000],
    ]);
  });

  it('puts a late event in event-time order', async () => {
    const lobby = (await updates(shop.venueId)).filter((r) => r.zone_id === shop.zones.lobby);
    // In arrival order the exit would clamp and the entry leave 1; in time order the visitor came and went.
    expect(lobby.at(-1)!.value).toBe(0);
  });

  it('gives the time-order figure for many crossings arriving shuffled', async () => {
    const { value: expected, clamped } = replayed(gateInOrder);
    const gate = (await updates(shop.venueId)).filter((r) => r.zone_id === shop.zones.gate);
    expect(gateArrivals.some(([ts], i) => i > 0 && ts < gateArrivals[i - 1]![0])).toBe(true);
    expect(gate.at(-1)!.value).toBe(expected);
    expect(gate.every((r) => r.value >= 0)).toBe(true);
    expect(clamped).toBeGreaterThan(0);
  });

  it('gives the time-order figure when crossings come minutes to an hour late', async () => {
    const inTime = replayed(crowdInOrder);
    // Arrival order would give another figure: the test would not notice a late crossing applied out of order.
    expect(replayed(crowdArrivals).value).not.toBe(inTime.value);
    const crowd = (await updates(shop.venueId)).filter((r) => r.zone_id === shop.zones.crowd);
    expect(crowd.at(-1)!.value).toBe(inTime.value);
    expect(crowd.every((r) => r.value >= 0)).toBe(true);
    // Update times never go back, late crossings or not.
    expect(crowd.every((r, i) => i === 0 || r.ts >= crowd[i - 1]!.ts)).toBe(true);
  });

  it('places a late count at its time, and a flow an hour late at its place', async () => {
    const rows = await updates(shop.venueId);
    const counted = rows.filter((r) => r.zone_id === shop.zones.counted);
    expect(counted.map((r) => [r.value, r.reason, r.ts])).toEqual([
      [5, 'flow', t + 10 * MINUTE],
      // The late count changes the figure; the update's time stays the newest (never back).
      [7, 'count', t + 10 * MINUTE],
    ]);
    const late = rows.filter((r) => r.zone_id === shop.zones.late);
    expect(late.map((r) => [r.value, r.clamped])).toEqual([
      [3, 0],
      [0, 0],
      [2, 0],
      // The exit at t + 1 min: 3 − 1 = 2, then the exit of 3 takes 1 below 0, then + 2.
      [2, 1],
    ]);
  });

  it('counts a re-delivered event once, and ignores an event of an earlier day', async () => {
    const rows = await updates(shop.venueId);
    expect(rows.filter((r) => r.zone_id === shop.zones.dup).map((r) => r.value)).toEqual([2, 3]);
    const prev = rows.filter((r) => r.zone_id === shop.zones.prev);
    expect(prev.map((r) => [r.value, r.reason])).toEqual([[1, 'flow']]);
  });

  it('answers the current figure of the venue and each zone, with capacity and percent', async () => {
    const got = await venueOccupancy(h, shop.operatorId, { id: shop.venueId });
    expect(got.occupancy).toBe(7);
    expect(got.updated_at).toBe(new Date(t + 65 * MINUTE).toISOString());
    const zone = (slug: string) => got.zones.find((z) => z.zone_id === shop.zones[slug]);
    expect(zone('hall')).toMatchObject({ occupancy: 10, capacity: 50, percent: 20, zone_type: 'area' });
    expect(zone('till')).toMatchObject({ occupancy: 1, capacity: null, percent: null });
    expect(zone('lobby')).toMatchObject({ occupancy: 0 });
    // A door counts for the venue, it has no occupancy of its own.
    expect(zone('door')).toMatchObject({ occupancy: null, updated_at: null });
  });

  it('resets daily at the venue-local hour across both DST changes', async () => {
    const rows = await updates(berlin.venueId);
    const resets = rows.filter((r) => r.reason === 'reset').map((r) => r.ts);
    expect(resets).toContain(spring + 2 * HOUR);
    expect(resets).toContain(fall + 3 * HOUR);
    const after = (ts: number) => rows.filter((r) => r.reason !== 'reset' && r.ts === ts)[0]!.value;
    expect(after(spring + HOUR + 50 * MINUTE)).toBe(4);
    expect(after(spring + 2 * HOUR + 10 * MINUTE)).toBe(2);
    expect(after(fall + 2 * HOUR + 30 * MINUTE)).toBe(7);
    expect(after(fall + 3 * HOUR + 10 * MINUTE)).toBe(1);
  });

  it('resets a quiet venue on the wall clock once the processor has read everything', async () => {
    // Berlin's last event is days old: the timer reset it at today's 04:00 local (within the last 25 hours).
    const got = await waitFor('the timer reset', async () => {
      const o = await venueOccupancy(h, berlin.operatorId, { id: berlin.venueId });
      return o.updated_at && Date.parse(o.updated_at) > now - 26 * HOUR ? o : undefined;
    });
    expect(got.occupancy).toBe(0);
    const lastReset = (await updates(berlin.venueId)).at(-1)!;
    expect(lastReset).toMatchObject({ reason: 'reset', value: 0 });
    const local = new Intl.DateTimeFormat('en-GB', {
      timeZone: 'Europe/Berlin',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    }).format(lastReset.ts);
    expect(local).toBe('04:00');
  });

  it('refuses another operator (403) and an unknown venue (404)', async () => {
    await expect(venueOccupancy(h, stranger.operatorId, { id: shop.venueId })).rejects.toMatchObject({ status: 403, code: 'FORBIDDEN' });
    await expect(venueOccupancy(h, shop.operatorId, { id: '00000000-0000-4000-8000-000000000000' })).rejects.toMatchObject({
      status: 404,
      code: 'NOT_FOUND',
    });
  });
});
