/**
 * Identifier shapes checked through a table of character codes. The events topic's consumers check
 * UUIDs and a pseudonym per event they read; the regular expressions took about twice as long
 * (benchmarks/README.md, "Identifiers checked by table").
 */

const NIL_UUID = '00000000-0000-0000-0000-000000000000';
const MAX_UUID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

/** 1 for the hex digits, 2 for the lower-case ones among them; indexed by UTF-16 code unit, so no bounds check. */
const HEX = new Uint8Array(65536);
for (const c of '0123456789abcdef') HEX[c.charCodeAt(0)] = 3;
for (const c of 'ABCDEF') HEX[c.charCodeAt(0)] = 1;

const hexRun = (s: string, from: number, to: number): boolean => {
  for (let i = from; i < to; i++) if (HEX[s.charCodeAt(i)] === 0) return false;
  return true;
};

/**
 * True exactly when `z.regexes.uuid()` (zod's `z.uuid()`) accepts `s`: versions 1–8 with the
 * RFC 9562 variant in either case, or the nil and max UUIDs in lower case.
 * test/unit/lib/ids.test.ts holds the two equal.
 */
export function isUuid(s: string): boolean {
  if (s.length !== 36 || s.charCodeAt(8) !== 45 || s.charCodeAt(13) !== 45 || s.charCodeAt(18) !== 45 || s.charCodeAt(23) !== 45)
    return false;
  if (!hexRun(s, 0, 8) || !hexRun(s, 9, 13) || !hexRun(s, 14, 18) || !hexRun(s, 19, 23) || !hexRun(s, 24, 36)) return false;
  const version = s.charCodeAt(14);
  // A hex digit's code with bit 5 set: upper-case letters read as lower case, digits unchanged.
  const variant = s.charCodeAt(19) | 0x20;
  if (version >= 49 /* 1 */ && version <= 56 /* 8 */ && (variant === 56 || variant === 57 || variant === 97 || variant === 98)) return true;
  return s === NIL_UUID || s === MAX_UUID;
}

/** True when `s` is `length` lower-case hex digits (a device pseudonym: 32). */
export function isLowerHex(s: string, length: number): boolean {
  if (s.length !== length) return false;
  for (let i = 0; i < length; i++) if ((HEX[s.charCodeAt(i)]! & 2) === 0) return false;
  return true;
}
