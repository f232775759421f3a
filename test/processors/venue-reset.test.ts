import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue, getVenue, listVenues, updateVenue } from '../../domain/venues/venues.js';
import { newVenue, openProcHarness, type ProcHarness } from './harness.js';

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
    await expect(updateVenue(h.db, stranger.operatorId, owner.venueId, { occupancy_reset_hour: 3 })).rejects.toMatchObject({ status: 403, code: 'FORBIDDEN' });
  });
});
