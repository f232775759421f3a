/**
 * The occupancy processor driven by hand, without engines: a fake venue look-up, `process` and
 * `tick` with a chosen wall clock, the changelog kept in memory.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeOccupancyUpdate, type OccupancyUpdate } from '../../../lib/events/derived.js';
import { type CanonicalEvent } from '../../../lib/events/canonical.js';
import { createOccupancyProcessor, type OccupancyState, type UnreflectedReason } from '../../../pipeline/processors/occupancy.js';
import { Driver, FakeVenues, flowEvent, request, venueInfo } from './fakes.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
/** Noon UTC; a venue in UTC resetting at 04:00 is in the period that began at 04:00. */
const T0 = Date.UTC(2026, 2, 10, 12);

/** A uuid that is not version 4: the processor takes it for an id derived from a vendor's, which a re-delivery repeats. */
const derivedId = () => `${randomUUID().slice(0, 14)}5${randomUUID().slice(15)}`;

function setup(over: Parameters<typeof venueInfo>[1] = {}) {
  const operatorId = randomUUID();
  const venueId = randomUUID();
  const zones = { door: randomUUID(), hall: randomUUID(), till: randomUUID() };
  const venues = new FakeVenues();
  venues.venues.set(
    venueId,
    venueInfo(operatorId, {
      zones: [
        { id: zones.door, type: 'entrance', capacity: null },
        { id: zones.hall, type: 'area', capacity: 40 },
        { id: zones.till, type: 'counter', capacity: null },
      ],
      ...over,
    }),
  );
  const unreflected: Record<string, number> = {};
  const proc = createOccupancyProcessor({
    venues,
    inputTopic: 'events',
    outputTopic: 'occupancy',
    unreflected: (_venueId: string, reason: UnreflectedReason, n: number) => (unreflected[reason] = (unreflected[reason] ?? 0) + n),
  });
  const driver = new Driver<OccupancyState, OccupancyUpdate>(proc, decodeOccupancyUpdate);
  const ev = (
    ts: number,
    type: 'entry' | 'exit' | 'occupancy',
    metrics: CanonicalEvent['metrics'] = {},
    more: Partial<CanonicalEvent> = {},
  ) => flowEvent({ operatorId, venueId, ts, type, metrics, ...more });
  /** Each event its own request, all in one batch. */
  const send = (events: CanonicalEvent[], now = T0 + HOUR) =>
    driver.process(
      events.map((e, i) => request([e], i)),
      now,
    );
  return { operatorId, venueId, zones, venues, unreflected, driver, ev, send };
}

/** The occupancy rule written out: event time, counts before flows, larger amounts first; never below 0. */
function expected(events: CanonicalEvent[]): number {
  const flows = events.map((e) => ({
    ts: e.ts,
    absolute: e.metrics.occupancy !== undefined,
    amount: e.metrics.occupancy ?? (e.type === 'entry' ? (e.metrics.entries ?? 1) : -(e.metrics.exits ?? 1)),
  }));
  flows.sort((a, b) => a.ts - b.ts || Number(b.absolute) - Number(a.absolute) || b.amount - a.amount);
  return flows.reduce((x, f) => (f.absolute ? f.amount : Math.max(0, x + f.amount)), 0);
}

const last = (updates: OccupancyUpdate[], zoneId: string | null = null) => updates.filter((u) => u.zoneId === zoneId).at(-1);

describe('occupancy from entries and exits', () => {
  it('emits one update per request and scope, with the figure after all its events', async () => {
    const { driver, ev, venueId, zones } = setup();
    const out = await driver.process([request([ev(T0, 'entry', { entries: 3 }), ev(T0 + SECOND, 'exit')])], T0);
    expect(out).toEqual([
      expect.objectContaining({
        venueId,
        zoneId: null,
        value: 2,
        capacity: null,
        percent: null,
        ts: T0 + SECOND,
        reason: 'flow',
        clamped: 0,
      }),
    ]);
    // A door counts for the venue; an area and a counter for themselves only.
    await driver.process([request([ev(T0 + 2 * SECOND, 'entry', {}, { zoneId: zones.door })])], T0);
    await driver.process([request([ev(T0 + 3 * SECOND, 'entry', { entries: 4 }, { zoneId: zones.till })])], T0);
    expect(last(driver.outputs)?.value).toBe(3);
    expect(last(driver.outputs, zones.till)?.value).toBe(4);
    expect(last(driver.outputs, zones.door)).toBeUndefined();
  });

  it('gives a zone over its capacity a percentage over 100: the count is not capped', async () => {
    const { driver, ev, zones } = setup();
    const [u] = await driver.process([request([ev(T0, 'entry', { entries: 50 }, { zoneId: zones.hall })])], T0);
    expect(u).toMatchObject({ zoneId: zones.hall, value: 50, capacity: 40, percent: 125 });
  });

  it('reaches the same figure whatever order the events come in, and a re-sent event is counted once', async () => {
    const kinds: Array<['entry' | 'exit' | 'occupancy', CanonicalEvent['metrics']]> = [
      ['entry', { entries: 3 }],
      ['exit', {}],
      ['exit', { exits: 4 }],
      ['entry', {}],
      ['occupancy', { occupancy: 7 }],
      ['exit', { exits: 2 }],
      ['entry', { entries: 2 }],
      ['exit', {}],
    ];
    const base = setup();
    const events = Array.from({ length: 40 }, (_, i) => {
      const [type, metrics] = kinds[(i * 5) % kinds.length]!;
      return base.ev(T0 + ((i * 7919) % 30) * 17 * SECOND, type, metrics, { id: derivedId() });
    });
    const want = expected(events);
    const orders = [events, [...events].reverse(), events.filter((_, i) => i % 2 === 0).concat(events.filter((_, i) => i % 2 === 1))];
    for (const order of orders) {
      const { driver, send, ev, unreflected } = setup();
      const same = order.map((e) => ev(e.ts, e.type as 'entry', e.metrics, { id: e.id }));
      await send(same);
      expect(last(driver.outputs)?.value).toBe(want);
      // Every event again, in another order: nothing moves.
      await send([...same].reverse());
      expect(last(driver.outputs)?.value).toBe(want);
      expect(unreflected.duplicate).toBe(events.length);
    }
  });
});

describe('the clamp at zero', () => {
  it('records the people an exit would take below 0, and places a late entry before the exit it preceded', async () => {
    const { ev, send } = setup();
    expect(await send([ev(T0, 'exit')])).toEqual([expect.objectContaining({ value: 0, clamped: 1 })]);
    // The entry happened before the exit: together they leave 0, and nothing is emitted.
    expect(await send([ev(T0 - MINUTE, 'entry')])).toEqual([]);
    // Arrival order would have given 2 (0, then +1, +1).
    expect(await send([ev(T0 + MINUTE, 'entry')])).toEqual([expect.objectContaining({ value: 1, clamped: 0 })]);
  });

  it('lets a count set the figure, whatever flows came before it', async () => {
    const { driver, ev, send } = setup();
    await send([ev(T0, 'entry', { entries: 5 })]);
    expect(await send([ev(T0 + 2 * MINUTE, 'occupancy', { occupancy: 10 })])).toEqual([
      expect.objectContaining({ value: 10, reason: 'count' }),
    ]);
    expect(await send([ev(T0 + MINUTE, 'exit', { exits: 3 })])).toEqual([]);
    await send([ev(T0 + 3 * MINUTE, 'exit')]);
    expect(last(driver.outputs)?.value).toBe(9);
  });
});

describe('the daily reset, in the venue’s time zone', () => {
  it('starts a new period at the venue-local reset hour: a reset update, then the figure from 0', async () => {
    // New York in January is UTC−5: 04:00 local is 09:00 UTC.
    const { driver, ev, send, unreflected } = setup({ timezone: 'America/New_York', occupancy_reset_hour: 4 });
    const day = Date.UTC(2026, 0, 15);
    await send([ev(day + 8 * HOUR + 30 * MINUTE, 'entry', { entries: 5 })]);
    expect(last(driver.outputs)?.value).toBe(5);
    expect(await send([ev(day + 9 * HOUR + 30 * MINUTE, 'entry', { entries: 2 })])).toEqual([
      expect.objectContaining({ value: 0, reason: 'reset', ts: day + 9 * HOUR }),
      expect.objectContaining({ value: 2, reason: 'flow' }),
    ]);
    // Yesterday's event is that day's history, not today's figure.
    expect(await send([ev(day + 8 * HOUR + 45 * MINUTE, 'entry')])).toEqual([]);
    expect(unreflected.earlier_day).toBe(1);
  });

  it('resets on a spring-forward day at the change when the reset hour does not exist', async () => {
    // Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00 UTC.
    const { ev, send } = setup({ timezone: 'Europe/Berlin', occupancy_reset_hour: 2 });
    await send([ev(Date.UTC(2026, 2, 29, 0, 30), 'entry')]);
    expect(await send([ev(Date.UTC(2026, 2, 29, 1, 30), 'entry')])).toEqual([
      expect.objectContaining({ value: 0, reason: 'reset', ts: Date.UTC(2026, 2, 29, 1) }),
      expect.objectContaining({ value: 1 }),
    ]);
  });

  it('does not show live an event received after its day had ended, even for a scope never seen (a backfill)', async () => {
    const { ev, send, unreflected } = setup();
    const late = ev(T0, 'entry', {}, { receivedAt: T0 + 24 * HOUR });
    expect(await send([late])).toEqual([]);
    expect(unreflected.earlier_day).toBe(1);
  });

  it('resets a quiet scope on the wall clock, only once the processor is caught up', async () => {
    const { driver, ev, send, zones } = setup();
    await send([ev(T0, 'entry', { entries: 3 }), ev(T0, 'entry', {}, { zoneId: zones.hall })]);
    const next = Date.UTC(2026, 2, 11, 4);
    expect(await driver.tick(next - SECOND)).toEqual([]);
    expect(await driver.tick(next + SECOND, false)).toEqual([]);
    const resets = await driver.tick(next + SECOND);
    expect(resets).toHaveLength(2);
    expect(resets).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ zoneId: null, value: 0, reason: 'reset', ts: next, capacity: null }),
        expect.objectContaining({ zoneId: zones.hall, value: 0, reason: 'reset', ts: next, capacity: 40, percent: 0 }),
      ]),
    );
    expect(await driver.tick(next + 2 * SECOND)).toEqual([]);
  });
});

describe('venues and zones', () => {
  it('reads a venue again, once per batch, for a zone it does not list yet', async () => {
    const { driver, ev, venues, venueId, operatorId } = setup();
    await driver.process([request([ev(T0, 'entry')])], T0);
    const lobby = randomUUID();
    venues.venues.get(venueId)!.zones.push({ id: lobby, type: 'area', capacity: 10 });
    const unknown = randomUUID();
    const out = await driver.process(
      [
        request([ev(T0, 'entry', {}, { zoneId: unknown }), ev(T0, 'entry', {}, { zoneId: unknown })]),
        request([ev(T0, 'entry', {}, { zoneId: lobby })], 1),
      ],
      T0,
    );
    expect(venues.refreshes).toEqual([venueId]);
    expect(out).toEqual([expect.objectContaining({ zoneId: lobby, value: 1, capacity: 10 })]);
    // Another operator's events, and an inactive venue's, count nowhere.
    expect(await driver.process([request([flowEvent({ operatorId: randomUUID(), venueId, ts: T0, type: 'entry' })])], T0)).toEqual([]);
    venues.venues.get(venueId)!.is_active = false;
    await venues.refresh(venueId);
    expect(await driver.process([request([flowEvent({ operatorId, venueId, ts: T0, type: 'entry' })])], T0)).toEqual([]);
  });
});

describe('restore from the changelog', () => {
  it('rebuilds a state that gives the same figures, and still knows the events already counted', async () => {
    const a = setup();
    const events = [
      a.ev(T0, 'entry', { entries: 6 }, { id: derivedId() }),
      a.ev(T0 + 5 * MINUTE, 'exit', { exits: 2 }, { id: derivedId() }),
      a.ev(T0 + 2 * MINUTE, 'exit', { exits: 9 }, { id: derivedId() }),
      a.ev(T0 + MINUTE, 'entry', {}, { id: derivedId(), zoneId: a.zones.hall }),
      a.ev(T0 + 3 * MINUTE, 'occupancy', { occupancy: 4 }, { id: derivedId(), zoneId: a.zones.till }),
    ];
    await a.send(events);
    const restored = new Driver(a.driver.proc, decodeOccupancyUpdate);
    restored.state = a.driver.restored();
    expect(a.driver.proc.size(restored.state)).toBe(a.driver.proc.size(a.driver.state));
    const more = [
      a.ev(T0 + 90 * SECOND, 'entry', { entries: 2 }),
      events[1]!,
      a.ev(T0 + 4 * MINUTE, 'exit', {}, { zoneId: a.zones.till }),
      a.ev(T0 + 30 * SECOND, 'entry', {}, { zoneId: a.zones.hall }),
    ];
    const batch = more.map((e, i) => request([e], i));
    expect(await restored.process(batch, T0 + HOUR)).toEqual(await a.driver.process(batch, T0 + HOUR));
    // The re-sent event was known to both.
    expect(a.unreflected.duplicate).toBe(2);
    const next = Date.UTC(2026, 2, 11, 4, 0, 1);
    expect(await restored.tick(next)).toEqual(await a.driver.tick(next));
  });

  it('deletes a chunk entry that does not read, and keeps the rest of the scope', async () => {
    const a = setup();
    await a.send([a.ev(T0, 'entry', { entries: 2 }), a.ev(T0 + 5 * MINUTE, 'entry')]);
    const broken = `${a.venueId}||#${Math.floor(T0 / MINUTE)}`;
    expect(a.driver.changelog.map(([k]) => k)).toContain(broken);
    a.driver.changelog.push([broken, Buffer.from([1, 0, 5])]);
    const restored = new Driver(a.driver.proc, decodeOccupancyUpdate);
    restored.state = a.driver.restored();
    await restored.process([], T0 + HOUR);
    expect(restored.changelog).toEqual([[broken, null]]);
    expect(await restored.process([request([a.ev(T0 + 6 * MINUTE, 'entry')])], T0 + HOUR)).toEqual([expect.objectContaining({ value: 2 })]);
  });
});
