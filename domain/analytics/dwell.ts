import { z } from 'zod';
import type { Ch } from '../../clickhouse/client.js';
import { dwellHistogram } from '../../clickhouse/queries/derived.js';
import type { Queryable } from '../../postgres/client.js';
import { activeZones } from '../../postgres/queries/zones.js';
import { ownedVenue } from '../venues/access.js';
import { parseInput } from '../../lib/validate.js';

export const DWELL_BUCKETS = ['0-5m', '5-15m', '15-30m', '30-60m', '60m+'] as const;
export const DWELL_RANGES = { '24h': 1, '7d': 7, '30d': 30, '90d': 90 } as const;

/** GET /api/venues/:id/dwell?range=24h|7d|30d|90d (default 7d). */
export const dwellInput = z.object({ id: z.uuid(), range: z.enum(['24h', '7d', '30d', '90d']).default('7d') });

export const dwellOutput = z.object({
  zones: z.array(
    z.object({
      zone_id: z.string(),
      zone_name: z.string(),
      buckets: z.array(z.object({ range: z.enum(DWELL_BUCKETS), count: z.number().int().nonnegative() })),
    }),
  ),
});
export type DwellHistogram = z.infer<typeof dwellOutput>;

/**
 * Visits that have ended (unseen for the gap, left, or cut by the daily reset) and started in the
 * last `range` (up to now), by dwell time: first the whole venue
 * (`zone_id` "default"), then each active zone in creation order, every bucket present.
 */
export async function venueDwell(
  deps: { db: Queryable; ch: Ch },
  operatorId: string,
  input: z.input<typeof dwellInput>,
  now = Date.now(),
): Promise<DwellHistogram> {
  const { id, range } = parseInput(dwellInput, input, 'query');
  await ownedVenue(deps.db, operatorId, id);
  const toMs = now + 1;
  const fromMs = toMs - DWELL_RANGES[range] * 86_400_000;
  const [zones, rows] = await Promise.all([
    activeZones(deps.db, id),
    dwellHistogram(deps.ch, { operatorId, venueId: id, fromMs, toMs, nowMs: now }),
  ]);
  const entry = (zoneId: string, key: string, name: string) => ({
    zone_id: zoneId,
    zone_name: name,
    buckets: DWELL_BUCKETS.map((b, i) => ({ range: b, count: rows.find((r) => r.zone_id === key && r.bucket === i)?.visits ?? 0 })),
  });
  return { zones: [entry('default', '', 'Entire Venue'), ...zones.map((z) => entry(z.id, z.id, z.name))] };
}
