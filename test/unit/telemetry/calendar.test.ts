import { describe, expect, it } from 'vitest';
import { dayString, localDayNumber, localDayStart } from '../../../domain/telemetry/calendar.js';

const day = (iso: string) => Date.parse(`${iso}T00:00:00Z`) / 86_400_000;
const at = (iso: string) => Date.parse(iso);

describe('venue-local calendar days', () => {
  it('read the local date of an instant', () => {
    expect(dayString(localDayNumber(at('2026-11-20T23:30:00Z'), 'Europe/Berlin'))).toBe('2026-11-21');
    expect(dayString(localDayNumber(at('2026-11-20T23:30:00Z'), 'America/New_York'))).toBe('2026-11-20');
    expect(dayString(localDayNumber(at('2026-11-20T18:29:59Z'), 'Asia/Kolkata'))).toBe('2026-11-20');
    expect(dayString(localDayNumber(at('2026-11-20T18:30:00Z'), 'Asia/Kolkata'))).toBe('2026-11-21');
  });

  it('start at local midnight, across DST changes', () => {
    expect(localDayStart(day('2026-10-25'), 'Europe/Berlin')).toBe(at('2026-10-24T22:00:00Z'));
    expect(localDayStart(day('2026-10-26'), 'Europe/Berlin')).toBe(at('2026-10-25T23:00:00Z'));
    expect(localDayStart(day('2026-03-30'), 'Europe/Berlin')).toBe(at('2026-03-29T22:00:00Z'));
    expect(localDayStart(day('2026-11-01'), 'Asia/Kolkata')).toBe(at('2026-10-31T18:30:00Z'));
    expect(localDayStart(day('2026-11-01'), 'UTC')).toBe(at('2026-11-01T00:00:00Z'));
  });

  it('start at the first instant of the day where DST skips midnight (Chile)', () => {
    // 2026-09-06 00:00 does not exist in America/Santiago: the clocks jump to 01:00 (UTC-3).
    expect(localDayStart(day('2026-09-06'), 'America/Santiago')).toBe(at('2026-09-06T04:00:00Z'));
    expect(localDayStart(day('2026-09-07'), 'America/Santiago')).toBe(at('2026-09-07T03:00:00Z'));
  });

  it('refuse an unknown zone', () => {
    expect(() => localDayNumber(0, 'Mars/Olympus_Mons')).toThrow(RangeError);
  });
});
