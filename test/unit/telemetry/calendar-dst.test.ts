import { describe, expect, it } from 'vitest';
import {
  dayOfWeek,
  dayString,
  localDayNumber,
  localDayStart,
  localHour,
  localHourStart,
  nextPeriodStart,
  periodStart,
} from '../../../domain/telemetry/calendar.js';

/*
 * A venue's day, its hours and its daily occupancy period follow the venue's clock, also on the two
 * days a year it jumps. Europe/Berlin 2026: 02:00 CET → 03:00 CEST on 29 March (01:00 UTC),
 * 03:00 CEST → 02:00 CET on 25 October (01:00 UTC). America/New_York 2026: 8 March 07:00 UTC,
 * 1 November 06:00 UTC.
 */
const BERLIN = 'Europe/Berlin';
const NEW_YORK = 'America/New_York';
const HOUR = 3_600_000;
const day = (iso: string) => Date.parse(`${iso}T00:00:00Z`) / 86_400_000;
const at = (iso: string) => Date.parse(iso);
/** The local day's length in hours: from its first instant to the next day's. */
const hoursOf = (d: number, zone: string) => (localDayStart(d + 1, zone) - localDayStart(d, zone)) / HOUR;

describe('local day bounds', () => {
  it('make the days of the clock changes 23 and 25 hours long, the others 24', () => {
    expect(hoursOf(day('2026-03-28'), BERLIN)).toBe(24);
    expect(hoursOf(day('2026-03-29'), BERLIN)).toBe(23);
    expect(hoursOf(day('2026-10-25'), BERLIN)).toBe(25);
    expect(hoursOf(day('2026-03-08'), NEW_YORK)).toBe(23);
    expect(hoursOf(day('2026-11-01'), NEW_YORK)).toBe(25);
    expect(hoursOf(day('2026-10-25'), 'UTC')).toBe(24);
  });

  it('hold exactly the instants whose local day is that day (no instant in two days, none in none)', () => {
    for (const [iso, zone] of [
      ['2026-03-29', BERLIN],
      ['2026-10-25', BERLIN],
      ['2026-11-01', NEW_YORK],
      ['2026-04-05', 'Australia/Lord_Howe'], // the clock goes back half an hour
      ['2026-06-01', 'Asia/Kathmandu'], // UTC+05:45
    ] as const) {
      const d = day(iso);
      const start = localDayStart(d, zone);
      const end = localDayStart(d + 1, zone);
      expect(localDayNumber(start - 1000, zone), `${iso} ${zone} before`).toBe(d - 1);
      for (let t = start; t < end; t += 15 * 60_000) expect(localDayNumber(t, zone), `${zone} ${new Date(t).toISOString()}`).toBe(d);
      expect(localDayNumber(end - 1000, zone)).toBe(d);
      expect(localDayNumber(end, zone)).toBe(d + 1);
    }
  });

  it('read the local date right at the instants the clock jumps', () => {
    expect(dayString(localDayNumber(at('2026-10-24T21:59:59Z'), BERLIN))).toBe('2026-10-24');
    expect(dayString(localDayNumber(at('2026-10-24T22:00:00Z'), BERLIN))).toBe('2026-10-25');
    // 23:59 CET on the 25th is 22:59 UTC, a day that began at 22:00 UTC the day before.
    expect(dayString(localDayNumber(at('2026-10-25T22:59:00Z'), BERLIN))).toBe('2026-10-25');
    expect(dayString(localDayNumber(at('2026-10-25T23:00:00Z'), BERLIN))).toBe('2026-10-26');
  });

  it('name the day of the week (the weekly charts group by it)', () => {
    expect(dayOfWeek(day('2026-11-27'))).toBe(5); // a Friday
    expect(dayOfWeek(day('2026-03-29'))).toBe(0); // a Sunday
    expect(dayOfWeek(day('1969-12-31'))).toBe(3); // before the epoch: a Wednesday
  });
});

describe('local hours on the days the clock changes', () => {
  it('count the repeated hour twice and skip the missing one', () => {
    expect(localHour(at('2026-10-25T00:30:00Z'), BERLIN)).toBe(2); // 02:30 CEST
    expect(localHour(at('2026-10-25T01:30:00Z'), BERLIN)).toBe(2); // 02:30 CET, again
    expect(localHour(at('2026-03-29T00:59:59Z'), BERLIN)).toBe(1);
    expect(localHour(at('2026-03-29T01:00:00Z'), BERLIN)).toBe(3);
  });

  it('start a skipped hour at the jump, and a repeated hour at its first occurrence', () => {
    expect(localHourStart(day('2026-03-29'), 2, BERLIN)).toBe(at('2026-03-29T01:00:00Z'));
    expect(localHourStart(day('2026-10-25'), 2, BERLIN)).toBe(at('2026-10-25T00:00:00Z'));
    expect(localHourStart(day('2026-10-25'), 4, BERLIN)).toBe(at('2026-10-25T03:00:00Z'));
    expect(localHourStart(day('2026-03-29'), 0, BERLIN)).toBe(localDayStart(day('2026-03-29'), BERLIN));
  });
});

describe('daily occupancy periods (reset at a local hour)', () => {
  it('start at the reset hour of the venue’s clock, before and after a change', () => {
    expect(periodStart(at('2026-10-24T12:00:00Z'), 4, BERLIN)).toBe(at('2026-10-24T02:00:00Z'));
    expect(periodStart(at('2026-10-25T02:59:59Z'), 4, BERLIN)).toBe(at('2026-10-24T02:00:00Z'));
    expect(periodStart(at('2026-10-25T03:00:00Z'), 4, BERLIN)).toBe(at('2026-10-25T03:00:00Z'));
  });

  it('last 25 hours across the autumn change and 23 across the spring one', () => {
    const length = (ts: number) => (nextPeriodStart(ts, 4, BERLIN) - periodStart(ts, 4, BERLIN)) / HOUR;
    expect(length(at('2026-10-24T12:00:00Z'))).toBe(25);
    expect(length(at('2026-03-28T12:00:00Z'))).toBe(23);
    expect(length(at('2026-06-10T12:00:00Z'))).toBe(24);
  });

  it('reset at midnight on the day midnight is skipped (America/Santiago, 6 September 2026)', () => {
    // 00:00 does not exist that day: the period starts when the clocks jump to 01:00 (04:00 UTC).
    expect(periodStart(at('2026-09-06T12:00:00Z'), 0, 'America/Santiago')).toBe(at('2026-09-06T04:00:00Z'));
    expect(periodStart(at('2026-09-06T03:59:59Z'), 0, 'America/Santiago')).toBe(at('2026-09-05T04:00:00Z'));
  });
});
