import { describe, expect, it } from 'vitest';
import { localParts } from '../../../lib/time-zones.js';

describe('localParts', () => {
  it('reads the wall clock of an instant in a zone, across a DST change', () => {
    // 2026-03-29 01:00 UTC: Berlin moves from 02:00 CET to 03:00 CEST.
    expect(localParts(Date.UTC(2026, 2, 29, 0, 59, 59), 'Europe/Berlin')).toEqual({
      year: 2026,
      month: 3,
      day: 29,
      hour: 1,
      minute: 59,
      second: 59,
      weekday: 0,
    });
    expect(localParts(Date.UTC(2026, 2, 29, 1, 0, 0), 'Europe/Berlin')).toMatchObject({ hour: 3, minute: 0 });
    expect(localParts(Date.UTC(2026, 0, 1, 0, 0, 0), 'America/New_York')).toEqual({
      year: 2025,
      month: 12,
      day: 31,
      hour: 19,
      minute: 0,
      second: 0,
      weekday: 3,
    });
  });

  it('throws a RangeError for an unknown zone', () => {
    expect(() => localParts(0, 'Mars/Olympus_Mons')).toThrow(RangeError);
  });
});
