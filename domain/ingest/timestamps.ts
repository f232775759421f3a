/**
 * Event timestamps: ISO 8601 / RFC 3339 date-times with a time zone, e.g. `2025-06-01T12:00:00Z`,
 * `2025-06-01T14:00:00.123+02:00`. Seconds and fractions are optional; fractions beyond
 * milliseconds are truncated. Bare dates, local times without an offset and epoch numbers are
 * refused: their instant would be a guess.
 */
const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const isLeapYear = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;

/** Epoch milliseconds, or undefined when `text` is not such a timestamp (including Feb 30 and 25:00). */
export function parseTimestamp(text: string): number | undefined {
  return (text.length === 24 ? utcMillisForm(text) : undefined) ?? parseAnyForm(text);
}

/** The digit at `i`, or NaN: every check against a range is then false. */
const digit = (t: string, i: number) => {
  const d = t.charCodeAt(i) - 48;
  return d >= 0 && d <= 9 ? d : NaN;
};
/** Where `2025-06-01T12:00:00.000Z` has its separators, and which. */
const SEPARATOR_AT = [4, 7, 10, 13, 16, 19, 23];
const SEPARATOR = [45 /* - */, 45, 84 /* T */, 58 /* : */, 58, 46 /* . */, 90 /* Z */];

/**
 * `2025-06-01T12:00:00.000Z`, the form `toISOString` writes and most senders use, read character
 * by character: no match array and no substrings for every ingested event. Undefined for anything
 * else (the general reader then decides), years before 100 included.
 */
function utcMillisForm(t: string): number | undefined {
  for (let i = 0; i < SEPARATOR_AT.length; i++) if (t.charCodeAt(SEPARATOR_AT[i]!) !== SEPARATOR[i]) return undefined;
  const year = digit(t, 0) * 1000 + digit(t, 1) * 100 + digit(t, 2) * 10 + digit(t, 3);
  const month = digit(t, 5) * 10 + digit(t, 6);
  const day = digit(t, 8) * 10 + digit(t, 9);
  const hour = digit(t, 11) * 10 + digit(t, 12);
  const minute = digit(t, 14) * 10 + digit(t, 15);
  const second = digit(t, 17) * 10 + digit(t, 18);
  const ms = digit(t, 20) * 100 + digit(t, 21) * 10 + digit(t, 22);
  if (!(year >= 100 && month >= 1 && month <= 12 && hour <= 23 && minute <= 59 && second <= 59 && ms >= 0)) return undefined;
  if (!(day >= 1 && day <= (month === 2 && isLeapYear(year) ? 29 : DAYS_IN_MONTH[month - 1]!))) return undefined;
  return Date.UTC(year, month - 1, day, hour, minute, second, ms);
}

function parseAnyForm(text: string): number | undefined {
  const m = ISO_8601.exec(text);
  if (!m) return undefined;
  // Fields read one by one, the calendar checked by arithmetic: every event not in the form above comes here.
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = Number(m[4]);
  const minute = Number(m[5]);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  const offHours = m[10] === undefined ? 0 : Number(m[10]);
  const offMinutes = m[11] === undefined ? 0 : Number(m[11]);
  if (hour > 23 || minute > 59 || second > 59 || offHours > 23 || offMinutes > 59) return undefined;
  const ms = m[7] ? Number(m[7].slice(0, 3).padEnd(3, '0')) : 0;
  let utc: number;
  if (year >= 100) {
    if (month < 1 || month > 12 || day < 1 || day > (month === 2 && isLeapYear(year) ? 29 : DAYS_IN_MONTH[month - 1]!)) return undefined;
    utc = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  } else {
    const date = new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms));
    date.setUTCFullYear(year); // Date.UTC maps years 0-99 to 1900-1999
    if (date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return undefined;
    utc = date.getTime();
  }
  const offsetMinutes = m[8] ? 0 : (m[9] === '-' ? -1 : 1) * (offHours * 60 + offMinutes);
  return utc - offsetMinutes * 60_000;
}

/** How far ahead of ingest's clock an event time may be (the sink's memory of recent ids relies on it). */
export const MAX_FUTURE_MS = 5 * 60_000;
const DAY_MS = 86_400_000;

export const TIMESTAMP_HINT = 'e.g. 2025-06-01T12:00:00Z or 2025-06-01T14:00:00.250+02:00';

/** Why a timestamp is refused, or its epoch ms. The window: not over 5 min ahead, not older than retention. */
export function checkTimestamp(
  value: unknown,
  now: number,
  retention: { days: number; plan: string },
): { ts: number } | { reason: string } {
  if (value === undefined || value === null)
    return { reason: `timestamp is required: an ISO 8601 date-time with a time zone (${TIMESTAMP_HINT})` };
  if (typeof value !== 'string') {
    const what = typeof value === 'number' ? 'an epoch number' : `a ${Array.isArray(value) ? 'array' : typeof value}`;
    return { reason: `timestamp must be ISO 8601 (${TIMESTAMP_HINT}), not ${what}` };
  }
  const ts = parseTimestamp(value);
  if (ts === undefined) {
    return { reason: `timestamp must be ISO 8601 with a date, a time and a time zone (${TIMESTAMP_HINT})` };
  }
  if (ts > now + MAX_FUTURE_MS) return { reason: 'timestamp is more than 5 minutes in the future' };
  if (ts < now - retention.days * DAY_MS) {
    return { reason: `timestamp is older than the ${retention.days}-day retention of the ${retention.plan} plan` };
  }
  return { ts };
}
