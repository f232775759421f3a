import { z } from 'zod';
import type { Ch } from '../../clickhouse/client.js';
import { occupancyHours } from '../../clickhouse/queries/derived.js';
import type { Queryable } from '../../postgres/client.js';
import { dayOfWeek as dayOfWeekOf, localDayNumber, localHour, periodStart } from '../telemetry/calendar.js';
import { ownedVenue } from '../venues/access.js';
import { parseInput } from '../../lib/validate.js';
import { queryInt } from './schemas.js';

const HOUR_S = 3600;
/** History used: the last 28 days of complete hours. */
export const PREDICTION_DAYS = 28;
/** How far before the window the last known figure is looked for (occupancy holds until it changes). */
const CARRY_DAYS = 7;

/** GET /api/venues/:id/predictions/occupancy?dayOfWeek=0..6&hour=0..23, both required. */
export const predictionInput = z.object({ id: z.uuid(), dayOfWeek: queryInt(0, 6), hour: queryInt(0, 23) });

export const predictionOutput = z.object({
  dayOfWeek: z.number().int().min(0).max(6),
  hour: z.number().int().min(0).max(23),
  mean: z.number(),
  p25: z.number(),
  p75: z.number(),
  p95: z.number(),
  sampleSize: z.number().int().nonnegative(),
});
export type Prediction = z.infer<typeof predictionOutput>;

/** Linear interpolation between closest ranks (Hyndman–Fan type 7, numpy's default) of sorted values. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  const h = (sorted.length - 1) * p;
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo]! + (h - lo) * (sorted[hi]! - sorted[lo]!);
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/**
 * Expected whole-venue occupancy at a local day of week and hour (docs/processors.md#predictions).
 * A sample is one hour of the last 28 days (complete UTC hours before now) whose start falls on
 * that local day of week and hour: its value is the mean of the occupancy history's points in that
 * hour; an hour without points takes the last figure before it within the same period, and 0
 * once a daily reset has passed since (occupancy holds until it changes, and restarts at the
 * reset); hours before the venue's first figure have none. mean and percentiles are over the
 * samples, rounded to 2 decimals; no samples gives zeros and sampleSize 0.
 */
export async function predictOccupancy(
  deps: { db: Queryable; ch: Ch },
  operatorId: string,
  input: z.input<typeof predictionInput>,
  now = Date.now(),
): Promise<Prediction> {
  const { id, dayOfWeek, hour } = parseInput(predictionInput, input, 'query');
  const venue = await ownedVenue(deps.db, operatorId, id);
  const samples = await hourlySamples(deps.ch, operatorId, venue, now);
  return summarise(dayOfWeek, hour, samples.get(slot(dayOfWeek, hour)) ?? []);
}

/** GET /api/venues/:id/predictions/occupancy/week: path `{ id }`, no query. */
export const weekPredictionInput = z.object({ id: z.uuid() });

export const weekPredictionOutput = z.object({
  venue_id: z.uuid(),
  /** The venue's IANA time zone: dayOfWeek and hour are local to it. */
  timezone: z.string(),
  /** 168 cells, Sunday 0:00 first, then by hour. */
  cells: z.array(predictionOutput),
});
export type WeekPrediction = z.infer<typeof weekPredictionOutput>;

/**
 * The expected occupancy of every local day of week and hour at once, each cell as
 * `predictOccupancy` answers it (the same samples, one read instead of 168): the dashboard's heat map.
 */
export async function predictOccupancyWeek(
  deps: { db: Queryable; ch: Ch },
  operatorId: string,
  input: z.input<typeof weekPredictionInput>,
  now = Date.now(),
): Promise<WeekPrediction> {
  const { id } = parseInput(weekPredictionInput, input, 'query');
  const venue = await ownedVenue(deps.db, operatorId, id);
  const samples = await hourlySamples(deps.ch, operatorId, venue, now);
  const cells: Prediction[] = [];
  for (let d = 0; d < 7; d++) for (let h = 0; h < 24; h++) cells.push(summarise(d, h, samples.get(slot(d, h)) ?? []));
  return { venue_id: id, timezone: venue.timezone, cells };
}

const slot = (dayOfWeek: number, hour: number) => dayOfWeek * 24 + hour;

/**
 * The samples of the last 28 days per local (day of week × 24 + hour): one per complete hour, its
 * occupancy history's mean, carried from the last figure when the hour has no point (0 once a
 * daily reset passed since); hours before the venue's first figure have none.
 */
async function hourlySamples(
  ch: Ch,
  operatorId: string,
  venue: { id: string; timezone: string; occupancy_reset_hour: number },
  now: number,
): Promise<Map<number, number[]>> {
  const toSec = Math.floor(now / 1000 / HOUR_S) * HOUR_S;
  const fromSec = toSec - PREDICTION_DAYS * 86_400;
  const hours = new Map(
    (await occupancyHours(ch, { operatorId, venueId: venue.id, fromSec: fromSec - CARRY_DAYS * 86_400, toSec })).map((h) => [h.t, h]),
  );
  const periodOf = (sec: number) => periodStart(sec * 1000, venue.occupancy_reset_hour, venue.timezone);
  /** The last figure so far and the period it belongs to. */
  let last: { value: number; period: number } | undefined;
  const samples = new Map<number, number[]>();
  for (let t = fromSec - CARRY_DAYS * 86_400; t < toSec; t += HOUR_S) {
    const h = hours.get(t);
    let value: number | undefined;
    if (h) value = h.mean;
    else if (last) value = last.period === periodOf(t) ? last.value : 0;
    if (h) last = { value: h.last, period: periodOf(h.lastAt) };
    if (t < fromSec || value === undefined) continue;
    const ms = t * 1000;
    const key = slot(dayOfWeekOf(localDayNumber(ms, venue.timezone)), localHour(ms, venue.timezone));
    const list = samples.get(key);
    if (list) list.push(value);
    else samples.set(key, [value]);
  }
  return samples;
}

function summarise(dayOfWeek: number, hour: number, samples: number[]): Prediction {
  if (samples.length === 0) return { dayOfWeek, hour, mean: 0, p25: 0, p75: 0, p95: 0, sampleSize: 0 };
  samples.sort((a, b) => a - b);
  return {
    dayOfWeek,
    hour,
    mean: round2(samples.reduce((a, b) => a + b, 0) / samples.length),
    p25: round2(percentile(samples, 0.25)),
    p75: round2(percentile(samples, 0.75)),
    p95: round2(percentile(samples, 0.95)),
    sampleSize: samples.length,
  };
}
