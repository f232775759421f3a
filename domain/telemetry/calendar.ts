/**
 * Venue-local calendar days, computed with the runtime's IANA zone data (Intl), never with the
 * ClickHouse server's: the sink stamps each event with its local day and the telemetry query turns
 * local days back into instants with these same functions.
 */

import { localParts } from '../../lib/time-zones.js';

export const DAY_MS = 86_400_000;

/** The local wall-clock time of an instant, read as if it were UTC (epoch ms, whole seconds). */
function wallClock(ts: number, timeZone: string): number {
  const p = localParts(ts, timeZone);
  return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
}

const QUARTER_HOUR_MS = 900_000;
const dayCache = new Map<string, Map<number, number>>();

/**
 * The local calendar day of an instant, as days since 1970-01-01. Zone offsets and their changes
 * fall on whole quarter hours, so the day is constant within a UTC quarter hour: cached per zone
 * and quarter hour, since the sink asks this for every event.
 */
export function localDayNumber(ts: number, timeZone: string): number {
  let zone = dayCache.get(timeZone);
  if (!zone) dayCache.set(timeZone, (zone = new Map()));
  const quarter = Math.floor(ts / QUARTER_HOUR_MS);
  let day = zone.get(quarter);
  if (day === undefined) {
    if (zone.size > 50_000) zone.clear();
    day = Math.floor(wallClock(quarter * QUARTER_HOUR_MS, timeZone) / DAY_MS);
    zone.set(quarter, day);
  }
  return day;
}

let lastDay = NaN;
let lastDayString = '';

/** `YYYY-MM-DD` of a day number (the sink asks once per event, nearly always for the same day). */
export function dayString(day: number): string {
  if (day !== lastDay) {
    lastDayString = new Date(day * DAY_MS).toISOString().slice(0, 10);
    lastDay = day;
  }
  return lastDayString;
}

/**
 * The first instant of a local day: local midnight, or the first instant after it where a DST
 * change skips midnight. Local days never run backwards, so the start is the smallest instant
 * whose local day is `day`; the usual case is found from the zone offset in two steps.
 */
export function localDayStart(day: number, timeZone: string): number {
  const midnight = day * DAY_MS;
  const first = midnight - (wallClock(midnight, timeZone) - midnight);
  const guess = midnight - (wallClock(first, timeZone) - first);
  const isStart = (t: number) => localDayNumber(t, timeZone) >= day && localDayNumber(t - 1000, timeZone) < day;
  if (isStart(guess)) return guess;
  // Zone offsets lie within ±18 h: search that window to the second.
  let lo = midnight - 18 * 3_600_000;
  let hi = midnight + 18 * 3_600_000;
  while (hi - lo > 1000) {
    const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
    if (localDayNumber(mid, timeZone) >= day) hi = mid;
    else lo = mid;
  }
  return hi;
}

const HOUR_MS = 3_600_000;

/** The local hour (0..23) of an instant. */
export function localHour(ts: number, timeZone: string): number {
  return Math.floor((wallClock(ts, timeZone) % DAY_MS) / HOUR_MS);
}

/** The local day of week of a local day number: 0 Sunday … 6 Saturday (1970-01-01 was a Thursday). */
export const dayOfWeek = (day: number): number => (((day + 4) % 7) + 7) % 7;

/**
 * The first instant the local clock reads `hour`:00 on local day `day`; when a DST change skips
 * that time, the instant of the change (the first local time after it). On a day the clock goes
 * back, the earlier of the two instants.
 */
export function localHourStart(day: number, hour: number, timeZone: string): number {
  const target = day * DAY_MS + hour * HOUR_MS;
  const offsets = new Set([-DAY_MS, 0, DAY_MS].map((d) => wallClock(target + d, timeZone) - (target + d)));
  const candidates = [...offsets].map((o) => target - o).sort((a, b) => a - b);
  return candidates.find((c) => wallClock(c, timeZone) === target) ?? candidates.find((c) => wallClock(c, timeZone) > target)!;
}

const resetCache = new Map<string, number>();

/** The start of the daily period containing `ts`, periods starting each local day at `hour`:00. */
export function periodStart(ts: number, hour: number, timeZone: string): number {
  const day = localDayNumber(ts, timeZone);
  const at = (d: number) => {
    const key = `${timeZone}|${hour}|${d}`;
    let v = resetCache.get(key);
    if (v === undefined) {
      if (resetCache.size > 100_000) resetCache.clear();
      resetCache.set(key, (v = localHourStart(d, hour, timeZone)));
    }
    return v;
  };
  const today = at(day);
  return ts >= today ? today : at(day - 1);
}

/** The start of the next daily period after the one containing `ts`. */
export function nextPeriodStart(ts: number, hour: number, timeZone: string): number {
  const start = periodStart(ts, hour, timeZone);
  // A period is 23 to 25 hours: 26 hours later is always inside the next one.
  return periodStart(start + 26 * HOUR_MS, hour, timeZone);
}
