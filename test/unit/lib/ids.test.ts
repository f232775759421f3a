import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isLowerHex, isUuid } from '../../../lib/ids.js';

const ZOD_UUID = z.regexes.uuid();
const DEVICE = /^[0-9a-f]{32}$/;
/** Characters a near-miss is made of: every hex digit in both cases, the hyphen, and a few that are neither. */
const NEAR = '0123456789abcdefABCDEF-_gG .xz\u00e9';

/** A UUID-shaped text with up to three characters replaced, inserted or removed. */
const nearUuid = fc
  .tuple(
    fc.constantFrom(
      randomUUID(),
      randomUUID().toUpperCase(),
      '00000000-0000-0000-0000-000000000000',
      'ffffffff-ffff-ffff-ffff-ffffffffffff',
    ),
    fc.array(fc.tuple(fc.nat(37), fc.constantFrom(...NEAR), fc.constantFrom('replace', 'insert', 'remove')), { maxLength: 3 }),
  )
  .map(([base, edits]) => {
    let s = base;
    for (const [at, c, how] of edits) {
      const i = Math.min(at, s.length);
      s =
        how === 'replace'
          ? s.slice(0, i) + c + s.slice(i + 1)
          : how === 'insert'
            ? s.slice(0, i) + c + s.slice(i)
            : s.slice(0, i) + s.slice(i + 1);
    }
    return s;
  });

describe('isUuid', () => {
  it("answers as zod's UUID expression on near misses of every kind of UUID", () => {
    fc.assert(
      fc.property(nearUuid, (s) => isUuid(s) === ZOD_UUID.test(s)),
      { numRuns: 50_000 },
    );
  });

  it('takes versions 1 to 8 with the RFC variant, and the nil and max UUIDs in lower case only', () => {
    for (let version = 0; version <= 15; version++)
      for (const variant of '0123456789abcdefABCDEF') {
        const s = `0f1e2d3c-4b5a-${version.toString(16)}978-${variant}695-a4b3c2d1e0f9`;
        expect(isUuid(s), s).toBe(ZOD_UUID.test(s));
      }
    expect(isUuid('00000000-0000-0000-0000-000000000000')).toBe(true);
    expect(isUuid('ffffffff-ffff-ffff-ffff-ffffffffffff')).toBe(true);
    expect(isUuid('FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF')).toBe(false);
    expect(isUuid(randomUUID().toUpperCase())).toBe(true);
    expect(isUuid(`${randomUUID()}\n`)).toBe(false);
  });
});

describe('isLowerHex', () => {
  it('answers as /^[0-9a-f]{32}$/ on pseudonym-like texts', () => {
    const hex = fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEFg-'), minLength: 30, maxLength: 34 });
    fc.assert(
      fc.property(hex, (s) => isLowerHex(s, 32) === DEVICE.test(s)),
      { numRuns: 50_000 },
    );
  });
});
