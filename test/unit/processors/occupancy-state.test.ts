/** The occupancy model's arithmetic and its changelog codec, on their own. */
import { describe, expect, it } from 'vitest';
import { decodeChunk, decodeHead, encodeChunk, encodeHead } from '../../../pipeline/processors/occupancy/codec.js';
import {
  bound,
  CHUNK_MS,
  figure,
  newScope,
  place,
  startPeriod,
  type Chunk,
  type Scope,
} from '../../../pipeline/processors/occupancy/model.js';

const MINUTE = 60_000;
const P = Date.UTC(2026, 2, 10, 4);
const DERIVED = (n: number) => `0b7c3a52-${String(n).padStart(4, '0')}-5aaa-8aaa-000000000001`;

function scope(): Scope {
  const s = newScope('0b7c3a52-2222-4aaa-8aaa-00000000000a|');
  Object.assign(s, { live: true, operatorId: 'op', timezone: 'UTC', resetHour: 4, period: P, ts: P });
  return s;
}

type Flow = { ts: number; absolute: boolean; amount: number };

/** The rule written out: event time, counts before flows, larger amounts first; never below 0. */
function fold(flows: Flow[]): { value: number; clamps: number } {
  const sorted = [...flows].sort((a, b) => a.ts - b.ts || Number(b.absolute) - Number(a.absolute) || b.amount - a.amount);
  let value = 0;
  let clamps = 0;
  for (const f of sorted) {
    if (f.absolute) value = f.amount;
    else {
      value += f.amount;
      if (value < 0) {
        clamps -= value;
        value = 0;
      }
    }
  }
  return { value, clamps };
}

/** Deterministic flows over `minutes` minutes of the period, about one count in ten. */
function flows(n: number, minutes: number, seed = 7): Flow[] {
  let x = seed;
  const next = () => (x = (x * 48271) % 2147483647);
  return Array.from({ length: n }, () => {
    const absolute = next() % 10 === 0;
    const amount = absolute ? next() % 20 : (next() % 7) - 3;
    return { ts: P + (next() % (minutes * MINUTE)), absolute, amount };
  });
}

const fields = (c: Chunk) => ({
  keys: c.keys,
  amounts: c.amounts,
  ids: c.ids,
  dropped: c.dropped,
  counted: c.counted,
  sum: c.sum,
  low: c.low,
  value: c.value,
  after: c.after,
  lastKey: c.lastKey,
  lastAmount: c.lastAmount,
});

describe('the figure of a scope', () => {
  it('is the rule over its flows, whatever order they are placed in', () => {
    const all = flows(600, 12);
    const want = fold(all);
    for (const order of [all, [...all].reverse(), [...all].sort((a, b) => b.amount - a.amount)]) {
      const s = scope();
      order.forEach((f, i) => {
        place(s, f.ts, f.absolute, f.amount, null);
        // Asked midway too: the re-fold after later, earlier-placed flows must still be exact.
        if (i % 97 === 0) figure(s);
      });
      expect(figure(s)).toEqual(want);
    }
  });

  it('refuses a derived id it holds in the chunk, and takes it again in another period', () => {
    const s = scope();
    expect(place(s, P + 1000, false, 1, DERIVED(1)).placed).toBe('exact');
    expect(place(s, P + 1000, false, 1, DERIVED(1)).placed).toBe('duplicate');
    expect(figure(s).value).toBe(1);
    const changed = new Set<string>();
    startPeriod(s, P + 24 * 3_600_000, changed);
    expect(changed).toEqual(new Set([`${s.key}|#${Math.floor(P / CHUNK_MS)}`, s.key]));
    expect(figure(s)).toEqual({ value: 0, clamps: 0 });
    expect(place(s, P + 24 * 3_600_000 + 1000, false, 1, DERIVED(1)).placed).toBe('exact');
  });

  it('keeps the figure when the oldest chunks drop their flows, and approximates only what lands inside them', () => {
    const all = flows(400, 8, 11);
    const s = scope();
    for (const f of all) place(s, f.ts, f.absolute, f.amount, null);
    const changed = new Set<string>();
    bound(s, 100, changed);
    expect(s.flows).toBeLessThanOrEqual(100);
    expect(changed.size).toBeGreaterThan(0);
    expect(figure(s)).toEqual(fold(all));
    // A flow inside a dropped chunk is applied at its end; one after the held flows stays exact.
    expect(place(s, P + 1, false, 1, null).placed).toBe('approximated');
    expect(place(s, P + 9 * MINUTE, false, 1, null).placed).toBe('exact');
  });
});

describe('the changelog codec', () => {
  it('gives back a chunk exactly: flows, derived ids and fold state, dropped or not', () => {
    const s = scope();
    flows(300, 1, 3).forEach((f, i) => place(s, f.ts, f.absolute, f.amount, i % 3 === 0 ? DERIVED(i) : null));
    figure(s);
    const c = s.list[0]!;
    const back = decodeChunk(encodeChunk(c), c.minute, c.key);
    expect(fields(back)).toEqual(fields(c));
    expect(back.effect()).toEqual(c.effect());
    c.drop();
    expect(fields(decodeChunk(encodeChunk(c), c.minute, c.key))).toEqual(fields(c));
  });

  it('gives back a head', () => {
    const s = scope();
    Object.assign(s, { value: 17, ts: P + 5000, clampsAt: 3, timezone: 'Europe/Berlin', resetHour: 6 });
    expect(decodeHead(encodeHead(s))).toEqual({
      operatorId: 'op',
      timezone: 'Europe/Berlin',
      resetHour: 6,
      period: P,
      value: 17,
      ts: P + 5000,
      clampsAt: 3,
    });
    expect(decodeHead(Buffer.from('[2,"op"]'))).toBeNull();
  });

  it('refuses a chunk entry it cannot read, saying why', () => {
    const s = scope();
    place(s, P + 1000, false, 5, DERIVED(1));
    const c = s.list[0]!;
    const good = encodeChunk(c);
    expect(() => decodeChunk(Buffer.from([9, ...good.subarray(1)]), c.minute, c.key)).toThrow('unknown chunk entry format');
    expect(() => decodeChunk(good.subarray(0, good.length - 4), c.minute, c.key)).toThrow('chunk entry truncated');
    expect(() => decodeChunk(Buffer.alloc(0), c.minute, c.key)).toThrow('chunk entry truncated');
  });
});
