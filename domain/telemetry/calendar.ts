/**
 * Venue-local calendar days, computed with the runtime's IANA zone data (Intl), never with the
 * ClickHouse server's: the sink stamps each event with its local day and the telemetry query turns
 * local days back into instants with these same functions.
 */

export const DAY_MS = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    // Throws RangeError for an unknown zone.
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** The local wall-clock time of an instant, read as if it were UTC (epoch ms, whole seconds). */
function wallClock(ts: number, timeZone: string): number {
  const parts: Record<string, number> = {};
  for (const p of formatter(timeZone).formatToParts(ts)) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  return Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!);
}

/** The local calendar day of an instant, as days since 1970-01-01. */
export function localDayNumber(ts: number, timeZone: string): number {
  return Math.floor(wallClock(ts, timeZone) / DAY_MS);
}

/** `YYYY-MM-DD` of a day number. */
export function dayString(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
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
