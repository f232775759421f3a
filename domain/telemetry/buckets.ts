import type { DayRange, EpochRange } from '../../clickhouse/queries/telemetry.js';
import { validation } from '../../lib/errors.js';
import { DAY_MS, dayString, localDayNumber, localDayStart } from './calendar.js';

/** Most buckets one key may return (two weeks of minutes); a query over it is a 400, never truncated. */
export const TELEMETRY_POINT_CAP = 20_160;

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

/**
 * How a query's buckets are computed (docs/telemetry.md):
 * - interval a whole number of days: venue-local calendar days from the daily rollup, n-day
 *   buckets counted from 1970-01-01 (local), each starting at local midnight;
 * - else a whole number of hours: the hourly rollup, buckets aligned to the epoch (UTC);
 * - else a whole number of minutes: the minute rollup, aligned to the epoch;
 * - anything else (below a minute, or not whole minutes): 400, since no stored resolution can
 *   answer it exactly.
 * The range selects whole rollup rows by their start: [startTs, endTs). Buckets at the edges may
 * cover only part of their interval; each is stamped with its aligned start.
 */
export type BucketPlan = (EpochRange | DayRange) & {
  /** How many buckets the range has. */
  count: number;
  /** Every bucket of the range, as the query labels them: epoch seconds, or day numbers for '1d'. Built on demand (gap filling): up to the cap's 20,160 numbers. */
  buckets(): number[];
  /** A bucket label's start, epoch ms. */
  startOf(bucket: number): number;
};

export function planBuckets(startTs: number, endTs: number, intervalMs: number, timezone: string): BucketPlan {
  if (intervalMs < MINUTE_MS || intervalMs % MINUTE_MS !== 0) {
    throw validation('interval must be a whole number of minutes', [
      { field: 'interval', message: `must be a multiple of ${MINUTE_MS} ms (1 minute), the finest stored resolution` },
    ]);
  }
  if (intervalMs % DAY_MS === 0) return dayPlan(startTs, endTs, intervalMs / DAY_MS, timezone);
  const resolution = intervalMs % HOUR_MS === 0 ? '1h' : '1m';
  const res = resolution === '1h' ? HOUR_MS : MINUTE_MS;
  const from = Math.ceil(startTs / res) * res;
  const to = Math.ceil(endTs / res) * res;
  const first = Math.floor(from / intervalMs) * intervalMs;
  const last = Math.floor((to - res) / intervalMs) * intervalMs;
  const count = to > from ? (last - first) / intervalMs + 1 : 0;
  checkCap(count);
  return {
    resolution,
    fromSec: from / 1000,
    toSec: to / 1000,
    bucketSec: intervalMs / 1000,
    count,
    buckets: () => Array.from({ length: count }, (_, i) => (first + i * intervalMs) / 1000),
    startOf: (t) => t * 1000,
  };
}

function dayPlan(startTs: number, endTs: number, bucketDays: number, timezone: string): BucketPlan {
  let firstDay = localDayNumber(startTs, timezone);
  if (localDayStart(firstDay, timezone) < startTs) firstDay++;
  const lastDay = localDayNumber(endTs - 1, timezone);
  const first = Math.floor(firstDay / bucketDays) * bucketDays;
  const last = Math.floor(lastDay / bucketDays) * bucketDays;
  const count = lastDay >= firstDay ? (last - first) / bucketDays + 1 : 0;
  checkCap(count);
  return {
    resolution: '1d',
    fromDay: dayString(firstDay),
    toDay: dayString(lastDay),
    bucketDays,
    timezone,
    fromSec: localDayStart(firstDay, timezone) / 1000,
    toSec: localDayStart(lastDay + 1, timezone) / 1000,
    count,
    buckets: () => Array.from({ length: count }, (_, i) => first + i * bucketDays),
    startOf: (day) => localDayStart(day, timezone),
  };
}

function checkCap(count: number): void {
  if (count > TELEMETRY_POINT_CAP) {
    throw validation(`the query would return ${count} points per key; the cap is ${TELEMETRY_POINT_CAP}`, [
      { field: 'interval', message: `at most ${TELEMETRY_POINT_CAP} buckets per key: narrow startTs..endTs or widen the interval` },
    ]);
  }
}
