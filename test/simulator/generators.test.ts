import { describe, expect, it } from 'vitest';
import { CONNECTOR_TYPES } from '../../lib/events/vocabulary.js';
import { TrafficState, type TrafficOptions } from '../../simulator/model.js';
import { localDate, localParts, zonedTime } from '../../simulator/time.js';
import { generate, type GeneratedEvent } from '../../simulator/traffic/index.js';
import { VENUE_TEMPLATES, type SimVenue } from '../../simulator/venues.js';

const venues: SimVenue[] = VENUE_TEMPLATES.slice(0, 4).map((t, i) => ({
  ...t,
  id: `00000000-0000-4000-8000-00000000000${i}`,
  integrations: {},
}));
const DAY = 86_400_000;
// A fixed stretch of time, so the expectations do not depend on today's date.
const FROM = Date.UTC(2026, 2, 23, 0, 0); // Monday 23 March 2026 (UTC)

function all(options: TrafficOptions, from: number, to: number, step = to - from): Map<string, GeneratedEvent[]> {
  const state = new TrafficState(options);
  const out = new Map<string, GeneratedEvent[]>();
  for (const v of venues) {
    for (const c of v.connectors) {
      const events: GeneratedEvent[] = [];
      for (let t = from; t < to; t += step) events.push(...generate(c, { from: t, to: Math.min(to, t + step) }, v, state));
      out.set(`${v.key}/${c}`, events);
    }
  }
  return out;
}

describe('traffic generators', () => {
  it('the first four venues carry all seven connector types, in four time zones', () => {
    expect(new Set(venues.flatMap((v) => v.connectors))).toEqual(new Set(CONNECTOR_TYPES));
    expect(venues.map((v) => v.timezone)).toEqual(['Europe/Berlin', 'America/New_York', 'Asia/Tokyo', 'Australia/Sydney']);
  });

  it('give the same events for the same seed, and other events for another seed', () => {
    const a = all({ seed: 7, scale: 0.2, faults: true }, FROM, FROM + DAY);
    const b = all({ seed: 7, scale: 0.2, faults: true }, FROM, FROM + DAY);
    const c = all({ seed: 8, scale: 0.2, faults: true }, FROM, FROM + DAY);
    expect(a).toEqual(b);
    for (const [stream, events] of a) {
      expect(events.length, stream).toBeGreaterThan(0);
      expect(c.get(stream), stream).not.toEqual(events);
    }
  });

  it('do not depend on how time is cut into windows', () => {
    const whole = all({ seed: 3, scale: 0.2, faults: true }, FROM, FROM + DAY);
    const hourly = all({ seed: 3, scale: 0.2, faults: true }, FROM, FROM + DAY, 3_600_000);
    const odd = all({ seed: 3, scale: 0.2, faults: true }, FROM, FROM + DAY, 7 * 60_000 + 13_000);
    expect(hourly).toEqual(whole);
    expect(odd).toEqual(whole);
  });

  it('turning faults on adds malformed twins, silences and over-capacity counts but changes no visitor', () => {
    const clean = all({ seed: 5, scale: 0.3, faults: false }, FROM, FROM + 3 * DAY);
    const faulty = all({ seed: 5, scale: 0.3, faults: true }, FROM, FROM + 3 * DAY);
    let malformed = 0;
    let overCapacity = 0;
    let silenced = 0;
    for (const [stream, events] of faulty) {
      malformed += events.filter((e) => e.malformed).length;
      const base = new Set(clean.get(stream)!.map((e) => JSON.stringify(e)));
      const venue = venues.find((v) => stream.startsWith(`${v.key}/`))!;
      // Every good event of the faulty run is one of the clean run's (silences only take away),
      // except occupancy counts raised above the zone's capacity.
      const changed = events.filter((e) => !e.malformed && !base.has(JSON.stringify(e)));
      for (const e of changed) {
        expect(e.event.type, stream).toBe('occupancy');
        const zone = venue.zones.find((z) => z.slug === e.event.payload.zone)!;
        expect(e.event.payload.occupancy as number).toBeGreaterThan(zone.capacity);
      }
      overCapacity += changed.length;
      silenced += clean.get(stream)!.length - events.filter((e) => !e.malformed).length;
      // Door counters are never silenced: their flows must balance.
      if (stream.endsWith('density') || stream.endsWith('verkada')) {
        const flows = (list: GeneratedEvent[]) => list.filter((e) => e.event.type === 'entry' || e.event.type === 'exit').length;
        expect(flows(events.filter((e) => !e.malformed)), stream).toBe(flows(clean.get(stream)!));
      }
    }
    expect(malformed).toBeGreaterThan(0);
    expect(overCapacity).toBeGreaterThan(0);
    expect(silenced).toBeGreaterThan(0);
  });

  it('follow a daily curve in each venue’s local time: nothing at night, peaks at lunch or in the evening', () => {
    const streams = all({ seed: 1, scale: 0.5, faults: false }, FROM, FROM + 7 * DAY);
    for (const v of venues) {
      const perHour = new Array<number>(24).fill(0);
      for (const c of v.connectors) {
        for (const e of streams.get(`${v.key}/${c}`)!)
          if (e.event.type === 'entry' || e.event.type === 'device_seen' || e.event.type === 'transaction')
            perHour[localParts(e.ts, v.timezone).hour]! += 1;
      }
      for (const h of [1, 2, 3, 4, 5]) expect(perHour[h], `${v.key} ${h}:00`).toBe(0);
      const peak = perHour.indexOf(Math.max(...perHour));
      expect(peak, `${v.key} peaks at ${peak}:00 (${perHour.join(',')})`).toBeGreaterThanOrEqual(11);
      expect(peak).toBeLessThanOrEqual(21);
    }
  });

  it('--rate scales the visitors of the days the live part covers, and only those', () => {
    const liveFrom = FROM + 2 * DAY + 12 * 3_600_000;
    const base = new TrafficState({ seed: 2, scale: 1, faults: false });
    const busy = new TrafficState({ seed: 2, scale: 1, faults: false, liveFrom, liveRate: 3 });
    const venue = venues[1]!;
    const before = localDate(FROM + DAY, venue.timezone);
    const during = localDate(liveFrom, venue.timezone);
    expect(busy.plan(venue, before)).toEqual(base.plan(venue, before));
    const ratio = busy.plan(venue, during).visits.length / base.plan(venue, during).visits.length;
    expect(ratio).toBeGreaterThan(2.5);
    expect(ratio).toBeLessThan(3.5);
  });

  it('keeps opening hours in local time across a DST change', () => {
    // Berlin moves to summer time on 29 March 2026; the store still opens at 10:00 local.
    const state = new TrafficState({ seed: 1, scale: 1, faults: false });
    for (const date of ['2026-03-28', '2026-03-30']) {
      const plan = state.plan(venues[0]!, date);
      expect(plan.open).toBe(zonedTime(date, 600, 'Europe/Berlin'));
      const first = plan.visits.filter((v) => v.kind !== 'staff')[0]!;
      expect(localDate(first.arrive, 'Europe/Berlin')).toBe(date);
      expect(localParts(first.arrive, 'Europe/Berlin').hour).toBeGreaterThanOrEqual(10);
    }
    expect(zonedTime('2026-03-30', 600, 'Europe/Berlin') - zonedTime('2026-03-28', 600, 'Europe/Berlin')).toBe(2 * DAY - 3_600_000);
  });
});
