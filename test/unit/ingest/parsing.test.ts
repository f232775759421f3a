import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseTimestamp } from '../../../domain/ingest/timestamps.js';
import { canonicalMac, isRandomizedMac } from '../../../domain/ingest/pseudonyms.js';

describe('event timestamps', () => {
  it.each([
    ['2025-06-01T12:00:00Z', Date.UTC(2025, 5, 1, 12)],
    ['2025-06-01t12:00:00z', Date.UTC(2025, 5, 1, 12)],
    ['2025-06-01 12:00:00Z', Date.UTC(2025, 5, 1, 12)],
    ['2025-06-01T12:00Z', Date.UTC(2025, 5, 1, 12)],
    ['2025-06-01T14:00:00+02:00', Date.UTC(2025, 5, 1, 12)],
    ['2025-06-01T14:00:00+0200', Date.UTC(2025, 5, 1, 12)],
    ['2025-06-01T14:00:00+02', Date.UTC(2025, 5, 1, 12)],
    ['2025-06-01T06:30:00-05:30', Date.UTC(2025, 5, 1, 12)],
    ['2025-06-01T12:00:00.5Z', Date.UTC(2025, 5, 1, 12, 0, 0, 500)],
    ['2025-06-01T12:00:00.123999999Z', Date.UTC(2025, 5, 1, 12, 0, 0, 123)],
    ['2025-06-01T12:00:00,25Z', Date.UTC(2025, 5, 1, 12, 0, 0, 250)],
    ['2024-02-29T00:00:00Z', Date.UTC(2024, 1, 29)],
    ['2000-02-29T00:00:00Z', Date.UTC(2000, 1, 29)],
    ['2025-12-31T23:59:59Z', Date.UTC(2025, 11, 31, 23, 59, 59)],
    ['0099-03-01T00:00:00Z', new Date(Date.UTC(2000, 2, 1)).setUTCFullYear(99)],
    ['2025-01-01T00:30:00+01:00', Date.UTC(2024, 11, 31, 23, 30)],
  ])('reads %s', (text, ms) => {
    expect(parseTimestamp(text)).toBe(ms);
  });

  it.each([
    'yesterday',
    '2025-06-01',
    '2025-06-01T12:00:00',
    '1748779200',
    '2025-02-29T00:00:00Z',
    '2025-04-31T00:00:00Z',
    '2025-13-01T00:00:00Z',
    '2025-00-10T00:00:00Z',
    '2025-06-00T00:00:00Z',
    '2025-06-31T00:00:00Z',
    '1900-02-29T00:00:00Z',
    '2025-06-01T24:00:00Z',
    '2025-06-01T12:60:00Z',
    '2025-06-01T12:00:60Z',
    '2025-06-01T12:00:00+24:00',
    '2025-06-01T12:00:00+02:60',
    '2025-06-01T12:00:00.Z',
    ' 2025-06-01T12:00:00Z',
    '2025-6-1T12:00:00Z',
    'Sun, 01 Jun 2025 12:00:00 GMT',
  ])('refuses %s', (text) => {
    expect(parseTimestamp(text)).toBeUndefined();
  });

  it('reads every instant of years 100-9999 as toISOString writes it', () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(100, 0, 1), max: Date.UTC(9999, 11, 31, 23, 59, 59, 999) }), (ms) => {
        expect(parseTimestamp(new Date(ms).toISOString())).toBe(ms);
      }),
      { numRuns: 20_000 },
    );
  });

  it('answers a 24-character text ending in Z as it answers the same text ending in +00:00', () => {
    // The first goes through the character reader when it has the toISOString shape, the second always through the general one.
    const chars = '0123456789-:.,Tt Zz+x';
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(100, 0, 1), max: Date.UTC(9999, 11, 31) }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 22 }), fc.integer({ min: 0, max: chars.length - 1 })), { maxLength: 3 }),
        (ms, edits) => {
          const text = [...new Date(ms).toISOString()];
          for (const [at, c] of edits) text[at] = chars[c]!;
          const z = text.join('');
          expect(parseTimestamp(z)).toBe(parseTimestamp(`${z.slice(0, 23)}+00:00`));
        },
      ),
      { numRuns: 20_000 },
    );
  });
});

describe('MAC addresses', () => {
  it.each(['AA:BB:CC:DD:EE:FF', 'aa-bb-cc-dd-ee-ff', 'aabb.ccdd.eeff', 'AABBCCDDEEFF', ' aa:bb:cc:dd:ee:ff '])(
    'reads %s as aa:bb:cc:dd:ee:ff',
    (text) => {
      expect(canonicalMac(text)).toBe('aa:bb:cc:dd:ee:ff');
    },
  );

  it.each(['aa:bb:cc:dd:ee', 'aa:bb:cc:dd:ee:ff:00', 'gg:bb:cc:dd:ee:ff', '', 'not a mac'])('refuses %j', (text) => {
    expect(canonicalMac(text)).toBeUndefined();
  });

  it('flags the locally administered bit (second hex digit 2, 6, a, e) as randomized', () => {
    for (const d of '0123456789abcdef') {
      expect(isRandomizedMac(`1${d}:00:00:00:00:00`), d).toBe('26ae'.includes(d));
    }
  });
});
