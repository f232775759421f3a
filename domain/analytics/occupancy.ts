import { z } from 'zod';
import type { Ch } from '../../clickhouse/client.js';
import { currentOccupancy } from '../../clickhouse/queries/derived.js';
import type { Queryable } from '../../postgres/client.js';
import { activeZones } from '../../postgres/queries/zones.js';
import { ownedVenue } from '../venues/access.js';

/** GET /api/venues/:id/occupancy (our addition): path `{ id }`, no query. */
export const venueOccupancyInput = z.object({ id: z.uuid() });

const figure = {
  /** People present now; null for entrance/exit zones, which count for the whole venue. */
  occupancy: z.number().int().nonnegative().nullable(),
  capacity: z.number().nonnegative().nullable(),
  /** occupancy / capacity × 100 (2 decimals), null without a capacity. */
  percent: z.number().nonnegative().nullable(),
  /** When the figure last changed (ISO 8601); null before the first update. */
  updated_at: z.iso.datetime().nullable(),
};

export const venueOccupancyOutput = z.object({
  venue_id: z.uuid(),
  ...figure,
  zones: z.array(
    z.object({ zone_id: z.uuid(), zone_name: z.string(), zone_type: z.enum(['area', 'entrance', 'exit', 'counter']), ...figure }),
  ),
});
export type VenueOccupancy = z.infer<typeof venueOccupancyOutput>;

const percentOf = (value: number | null, capacity: number | null) =>
  value === null || !capacity ? null : Math.round((value / capacity) * 10_000) / 100;

/**
 * The live occupancy of one of the operator's venues and of each active zone, from the occupancy
 * processor's newest updates (docs/processors.md#occupancy). Capacity is the zone's current one.
 */
export async function venueOccupancy(
  deps: { db: Queryable; ch: Ch },
  operatorId: string,
  input: z.infer<typeof venueOccupancyInput>,
): Promise<VenueOccupancy> {
  await ownedVenue(deps.db, operatorId, input.id);
  const [zones, rows] = await Promise.all([activeZones(deps.db, input.id), currentOccupancy(deps.ch, { operatorId, venueId: input.id })]);
  const latest = new Map(rows.map((r) => [r.zone_id, r]));
  const at = (zoneId: string) => {
    const r = latest.get(zoneId);
    return r ? new Date(r.at).toISOString() : null;
  };
  const venue = latest.get('');
  return {
    venue_id: input.id,
    occupancy: venue?.value ?? 0,
    capacity: null,
    percent: null,
    updated_at: at(''),
    zones: zones.map((z) => {
      const door = z.type === 'entrance' || z.type === 'exit';
      const value = door ? null : (latest.get(z.id)?.value ?? 0);
      return {
        zone_id: z.id,
        zone_name: z.name,
        zone_type: z.type as 'area' | 'entrance' | 'exit' | 'counter',
        occupancy: value,
        capacity: z.capacity,
        percent: percentOf(value, z.capacity),
        updated_at: door ? null : at(z.id),
      };
    }),
  };
}
