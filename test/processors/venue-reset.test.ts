import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue, getVenue, listVenues, updateVenue } from '../../domain/venues/venues.js';
import { encodeEventMessages } from '../../lib/events/wire.js';
import { type OccupancyUpdate } from '../../lib/events/derived.js';
import { createOccupancyProcessor } from '../../pipeline/processors/occupancy.js';
import type { ProcessorContext } from '../../pipeline/processors/processor.js';
import { VenueInfos } from '../../pipeline/processors/venues.js';
import { event, newVenue, openProcHarness, type ProcHarness } from './harness.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

let h: ProcHarness;
let owner: Awaited<ReturnType<typeof newVenue>>;
let stranger: Awaited<ReturnType<typeof newVenue>>;

beforeAll(async () => {
  h = await openProcHarness();
  owner = await newVenue(h.db);
  stranger = await newVenue(h.db);
});

afterAll(async () => {
  await h.close();
});

describe('the venue occupancy reset hour', () => {
  it('defaults to 4, is set on create and update, and is returned by every venue read', async () => {
    const plain = await createVenue(h.db, owner.operatorId, { name: 'Plain', timezone: 'Europe/Berlin' });
    expect((await getVenue(h.db, owner.operatorId, plain.id)).occupancy_reset_hour).toBe(4);
    const late = await createVenue(h.db, owner.operatorId, { name: 'Late', timezone: 'UTC', occupancy_reset_hour: 6 });
    expect((await getVenue(h.db, owner.operatorId, late.id)).occupancy_reset_hour).toBe(6);
    const updated = await updateVenue(h.db, owner.operatorId, late.id, { occupancy_reset_hour: 0 });
    expect(updated.occupancy_reset_hour).toBe(0);
    // Other fields leave it alone.
    expect((await updateVenue(h.db, owner.operatorId, late.id, { name: 'Later' })).occupancy_reset_hour).toBe(0);
    const page = await listVenues(h.db, owner.operatorId, { limit: 50, offset: 0 });
    expect(page.data.find((v) => v.id === late.id)!.occupancy_reset_hour).toBe(0);
  });

  it('cannot be changed on another operator’s venue', async () => {
    await expect(updateVenue(h.db, stranger.operatorId, owner.venueId, { occupancy_reset_hour: 3 })).rejects.toMatchObject({
      status: 403,
      code: 'FORBIDDEN',
    });
  });
});

describe('the occupancy processor and the reset hour', () => {
  it('applies a changed hour from the next reset: events since the current period began still count', async () => {
    const venue = await newVenue(h.db, { resetHour: 4 });
    // Venue contexts read fresh from Postgres on every batch.
    const reports: string[] = [];
    const proc = createOccupancyProcessor({
      venues: new VenueInfos(h.db, 0),
      inputTopic: 'events',
      outputTopic: 'occupancy',
      unreflected: (_v, reason, n) => reports.push(`${reason}:${n}`),
    });
    const state = proc.createState();
    const ctx = (caughtUp = false, now = Date.now()): ProcessorContext => ({ partition: 0, now, caughtUp, log: h.log });
    const day = Date.UTC(2026, 0, 15);
    const updates: OccupancyUpdate[] = [];
    const send = async (ts: number, entries: number) => {
      const [m] = encodeEventMessages([
        event({ operatorId: venue.operatorId, venueId: venue.venueId, ts, type: 'entry', metrics: { entries } }),
      ]);
      const effects = await proc.process(
        state,
        [{ topic: 'events', partition: 0, offset: '0', value: m!.value, headers: m!.headers }],
        ctx(),
      );
      updates.push(...effects.outputs.map((o) => JSON.parse(o.value.toString()) as OccupancyUpdate));
    };
    await send(day + 5 * HOUR, 2);
    await updateVenue(h.db, venue.operatorId, venue.venueId, { occupancy_reset_hour: 6 });
    // 05:30: after today's 04:00 reset, before the next one (06:00 under the new hour): same period.
    await send(day + 5 * HOUR + 30 * MINUTE, 1);
    // 06:30: the new hour's first reset is behind it.
    await send(day + 6 * HOUR + 30 * MINUTE, 4);
    // 04:30 is now before the current period (06:00): an earlier day.
    await send(day + 4 * HOUR + 30 * MINUTE, 8);
    expect(updates.map((u) => [u.value, u.reason, u.ts])).toEqual([
      [2, 'flow', day + 5 * HOUR],
      [3, 'flow', day + 5 * HOUR + 30 * MINUTE],
      [0, 'reset', day + 6 * HOUR],
      [4, 'flow', day + 6 * HOUR + 30 * MINUTE],
    ]);
    expect(reports).toEqual(['earlier_day:1']);
    // The wall clock resets it at the new hour too.
    const quiet = await proc.tick(state, ctx(true, day + DAY + 6 * HOUR + MINUTE));
    expect(quiet.outputs.map((o) => JSON.parse(o.value.toString()) as OccupancyUpdate).map((u) => [u.value, u.reason, u.ts])).toEqual([
      [0, 'reset', day + DAY + 6 * HOUR],
    ]);
  });
});
