import { describe, expect, it } from 'vitest';
import { jsonDepth, MAX_JSON_DEPTH } from '../../../lib/validate.js';

describe('jsonDepth', () => {
  it('counts arrays and objects, not brackets inside strings, whatever escapes them', () => {
    expect(jsonDepth('{"a":[1,{"b":[]}]}')).toBe(4);
    expect(jsonDepth('["[[[{{{"]')).toBe(1);
    expect(jsonDepth('["a\\\\"]')).toBe(1); // an escaped backslash, then the closing quote
    expect(jsonDepth('["a\\"]"]]')).toBe(1); // an escaped quote inside the string
    expect(jsonDepth('[{"k":"\\\\\\"[[["}]')).toBe(2);
    expect(jsonDepth('"\\\\\\\\"')).toBe(0);
    expect(jsonDepth('["unterminated [[[')).toBe(1);
  });

  it('stops counting once past the limit', () => {
    expect(jsonDepth('['.repeat(MAX_JSON_DEPTH) + ']'.repeat(MAX_JSON_DEPTH))).toBe(MAX_JSON_DEPTH);
    expect(jsonDepth('['.repeat(100_000))).toBe(MAX_JSON_DEPTH + 1);
  });

  it('agrees with the parse on generated documents', () => {
    const depthOf = (v: unknown): number =>
      v !== null && typeof v === 'object' ? 1 + Math.max(0, ...Object.values(v as object).map(depthOf)) : 0;
    let seed = 7;
    const rnd = () => (seed = (seed * 1_103_515_245 + 12_345) >>> 0) / 2 ** 32;
    const gen = (d: number): unknown => {
      const r = rnd();
      if (d > 6 || r < 0.3) return ['x', 'q"[{', 'b\\', '\\"]', 1.5, null][Math.floor(rnd() * 6)];
      return r < 0.65 ? Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => gen(d + 1)) : { 'k"[': gen(d + 1), '\\': gen(d + 1) };
    };
    for (let i = 0; i < 300; i++) {
      const v = gen(0);
      expect(jsonDepth(JSON.stringify(v))).toBe(depthOf(v));
    }
  });
});
