import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Ch } from '../../clickhouse/client.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { createLogger } from '../../lib/logger.js';
import { startDeriveJob, type RunningDerive } from '../../pipeline/derive/job.js';
import { toRow } from '../../pipeline/sink/rows.js';
import type { Db } from '../../postgres/client.js';
import { testConfig } from '../support/env.js';
import { deviceId, event, newVenue } from '../processors/harness.js';
import { MINUTE, oracleOccupancy, oracleVisits, type DoorEvent, type Sighting } from './oracle.js';
import { scratchDatabase, storedFigures, type ScratchDatabase } from './scratch-database.js';

/**
 * The derive job's first round in a database (no progress yet) rebuilds every venue period from
 * the raw events. The marks of the events it read must not make the next round recompute the
 * same periods again; marks of events stored after it still must.
 */
const TZ = 'UTC';
let scratch: ScratchDatabase;
let ch: Ch;
let db: Db;
let job: RunningDerive;
let offset = 0;

beforeAll(async () => {
  scratch = await scratchDatabase('first_round');
  ({ ch, db } = scratch);
  job = startDeriveJob({ ch, db, log: createLogger('derive-first', testConfig().LOG_LEVEL), intervalMs: 3_600_000 });
}, 60_000);

afterAll(async () => {
  await job?.stop();
  await scratch?.close();
});

const store = (events: CanonicalEvent[]) =>
  insertEvents(
    ch,
    events.map((e) =>
      toRow(e, { topic: 'first-round', partition: 0, offset: String(offset++), index: 0 }, { timezone: TZ, retentionDays: 365 }),
    ),
  );

describe('the first derive round of a database', () => {
  it('rebuilds from the stored events; the next round recomputes only periods with events stored since', async () => {
    const now = Date.now();
    // The period is the same day, far from its reset.
    const resetHour = (new Date(now).getUTCHours() + 12) % 24;
    const from = now - 40 * MINUTE;
    const venues: Array<{ v: Awaited<ReturnType<typeof newVenue>>; sightings: Sighting[]; doors: DoorEvent[] }> = [];
    for (let i = 0; i < 2; i++) {
      const v = await newVenue(db, { timezone: TZ, resetHour, zones: [{ slug: 'door', type: 'entrance' }] });
      const sightings: Sighting[] = [];
      const doors: DoorEvent[] = [];
      const events: CanonicalEvent[] = [];
      const device = deviceId(`first-${i}`);
      for (let t = from; t < from + 20 * MINUTE; t += 2 * MINUTE) {
        sightings.push({ ts: t, device, zone: null, left: false });
        events.push(event({ ...v, ts: t, type: 'device_seen', device }));
      }
      for (let d = 0; d <= i; d++) {
        const door = event({ ...v, ts: from + d * MINUTE, type: 'entry', zoneId: v.zones.door!, metrics: { entries: 1 } });
        doors.push({ ts: door.ts, id: door.id, kind: 'entry', amount: 1, forVenue: true });
        events.push(door);
      }
      await store(events);
      venues.push({ v, sightings, doors });
    }
    const expected = (i: number) => ({
      visits: oracleVisits(venues[i]!.sightings, resetHour, TZ).length,
      occupancy: oracleOccupancy(venues[i]!.doors, resetHour, TZ).at(-1)!.value,
    });

    await job.runOnce();
    expect(job.stats.failures).toBe(0);
    const rebuilt = { ...job.stats };
    expect(rebuilt.visitPeriods).toBe(2);
    expect(rebuilt.occupancyPeriods).toBe(2);
    let got = await storedFigures(ch);
    for (const [i, { v }] of venues.entries()) expect(got.get(v.venueId)).toEqual(expected(i));

    // The events' marks are within the next round's overlap, but the rebuild read their events.
    await job.runOnce();
    expect(job.stats.failures).toBe(0);
    expect({ visits: job.stats.visitPeriods, occupancy: job.stats.occupancyPeriods }).toEqual({ visits: 2, occupancy: 2 });

    // An exit stored now, at the second venue: only its period is recomputed, and its figure follows.
    const second = venues[1]!;
    const exit = event({ ...second.v, ts: from + 25 * MINUTE, type: 'exit', zoneId: second.v.zones.door!, metrics: { exits: 1 } });
    second.doors.push({ ts: exit.ts, id: exit.id, kind: 'exit', amount: 1, forVenue: true });
    await store([exit]);
    await job.runOnce();
    expect(job.stats.failures).toBe(0);
    expect(job.stats.occupancyPeriods).toBe(3);
    got = await storedFigures(ch);
    expect(got.get(second.v.venueId)).toEqual(expected(1));
    expect(expected(1).occupancy).toBe(1);
    expect(got.get(venues[0]!.v.venueId)).toEqual(expected(0));
  }, 120_000);
});
