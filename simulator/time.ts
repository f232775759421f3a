/** Local-time arithmetic for IANA time zones with Intl only (DST-correct, no dependency). */

import { localParts } from '../lib/time-zones.js';

export { localParts, type LocalParts } from '../lib/time-zones.js';

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** The zone's offset from UTC at an instant, in ms (local = utc + offset). */
function offsetAt(ts: number, timeZone: string): number {
  const p = localParts(ts, timeZone);
  const asUtc = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
  return asUtc - Math.floor(ts / 1000) * 1000;
}

/** A local calendar date as `YYYY-MM-DD`. */
export type LocalDate = string;

export function localDate(ts: number, timeZone: string): LocalDate {
  const p = localParts(ts, timeZone);
  return `${p.year}-${String(p.month).padStart(2, '0')}-${String(p.day).padStart(2, '0')}`;
}

export function addDays(date: LocalDate, days: number): LocalDate {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  return new Date(Date.UTC(y, m - 1, d + days)).toISOString().slice(0, 10);
}

/** The day of the week of a local date, 0 = Sunday. */
export function weekdayOf(date: LocalDate): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  return new Date(Date.UTC(y, m - 1, d)).getUTCDay();
}

/** The instant of `minutes` after local midnight of `date` (a time skipped by DST moves forward). */
export function zonedTime(date: LocalDate, minutes: number, timeZone: string): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  const wall = Date.UTC(y, m - 1, d, 0, minutes);
  const first = wall - offsetAt(wall, timeZone);
  return wall - offsetAt(first, timeZone);
}

/** Minutes since local midnight, with fractions. */
export function localMinutes(ts: number, timeZone: string): number {
  const p = localParts(ts, timeZone);
  return p.hour * 60 + p.minute + p.second / 60;
}
