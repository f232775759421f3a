import { z } from 'zod';
import type { Ch } from '../../clickhouse/client.js';
import { visitDays } from '../../clickhouse/queries/derived.js';
import type { Queryable } from '../../postgres/client.js';
import { dayString, localDayNumber, periodStart } from '../telemetry/calendar.js';
import { ownedVenue } from '../venues/access.js';
import { parseInput } from '../../lib/validate.js';

export const SCORING_RANGES = { '7d': 7, '30d': 30, '90d': 90 } as const;

/** GET /api/venues/:id/visitors/scoring?range=7d|30d|90d (default 30d). */
export const scoringInput = z.object({ id: z.uuid(), range: z.enum(['7d', '30d', '90d']).default('30d') });

export const SEGMENTS = [
  { name: 'New', min: 1, max: 1 },
  { name: 'Returning', min: 2, max: 3 },
  { name: 'Regular', min: 4, max: 7 },
  { name: 'Loyal', min: 8, max: Infinity },
] as const;

export const scoringOutput = z.object({
  segments: z.array(
    z.object({
      name: z.enum(['New', 'Returning', 'Regular', 'Loyal']),
      count: z.number().int().nonnegative(),
      percentage: z.number().min(0).max(100),
    }),
  ),
  total: z.number().int().nonnegative(),
  range: z.enum(['7d', '30d', '90d']),
});
export type Scoring = z.infer<typeof scoringOutput>;

/**
 * Percentages with two decimals that sum to exactly 100 (largest remainder), or all 0 when the
 * total is 0.
 */
export function percentages(counts: number[]): number[] {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return counts.map(() => 0);
  const exact = counts.map((c) => (c * 10_000) / total);
  const floors = exact.map(Math.floor);
  let left = 10_000 - floors.reduce((a, b) => a + b, 0);
  const order = exact.map((e, i) => [e - floors[i]!, i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (const [, i] of order) {
    if (left-- <= 0) break;
    floors[i]!++;
  }
  return floors.map((f) => f / 100);
}

/**
 * Devices of the venue by distinct visit days in the last `range` days (today's included): a
 * visit day is one of the venue's periods between daily resets, named by the local date it starts
 * on; every qualifying whole-venue visit counts, ended or still going on.
 */
export async function visitorScoring(
  deps: { db: Queryable; ch: Ch },
  operatorId: string,
  input: z.input<typeof scoringInput>,
  now = Date.now(),
): Promise<Scoring> {
  const { id, range } = parseInput(scoringInput, input, 'query');
  const venue = await ownedVenue(deps.db, operatorId, id);
  // Visit days are the venue's periods (from its daily reset hour), named by the local date they start on.
  const today = localDayNumber(periodStart(now, venue.occupancy_reset_hour, venue.timezone), venue.timezone);
  const rows = await visitDays(deps.ch, {
    operatorId,
    venueId: id,
    fromDay: dayString(today - SCORING_RANGES[range] + 1),
    toDay: dayString(today),
  });
  const counts = SEGMENTS.map((s) => rows.filter((r) => r.days >= s.min && r.days <= s.max).reduce((n, r) => n + Number(r.devices), 0));
  const pct = percentages(counts);
  return {
    segments: SEGMENTS.map((s, i) => ({ name: s.name, count: counts[i]!, percentage: pct[i]! })),
    total: counts.reduce((a, b) => a + b, 0),
    range,
  };
}
