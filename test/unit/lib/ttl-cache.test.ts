import { describe, expect, it } from 'vitest';
import { TtlCache } from '../../../lib/ttl-cache.js';

describe('TtlCache', () => {
  it('keeps a value for the TTL and drops it after', () => {
    let t = 1000;
    const cache = new TtlCache<string, number>({ ttlMs: 100, now: () => t });
    cache.set('a', 1);
    t = 1099;
    expect(cache.get('a')).toBe(1);
    t = 1100;
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
    cache.set('b', 2, 1000);
    expect(cache.get('b', 1050)).toBe(2);
    expect(cache.get('b', 1100)).toBeUndefined();
  });

  it('holds at most `max` entries, the oldest set going first', () => {
    const cache = new TtlCache<string, number>({ ttlMs: 1000, max: 2, now: () => 0 });
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('a', 10); // set again: now the newest
    cache.set('c', 3);
    expect(cache.size).toBe(2);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([10, undefined, 3]);
  });

  it('evicts in the order entries were set, through replacements, deletions and stale entries, as a plain Map would', () => {
    // The reference: the Map-order eviction the cache had before its order was kept on the side.
    let t = 0;
    const max = 50;
    const cache = new TtlCache<number, number>({ ttlMs: 40, max, now: () => t });
    const model = new Map<number, { at: number; value: number }>();
    let seed = 7;
    const random = (n: number) => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31), seed % n);
    for (let i = 0; i < 60_000; i++) {
      t += random(3);
      const key = random(i < 30_000 ? 80 : 400);
      const op = random(10);
      if (op < 6) {
        cache.set(key, i);
        model.delete(key);
        if (model.size >= max) model.delete(model.keys().next().value!);
        model.set(key, { at: t, value: i });
      } else if (op < 7) {
        cache.delete(key);
        model.delete(key);
      } else {
        const hit = model.get(key);
        const fresh = hit && t - hit.at < 40 ? hit.value : undefined;
        if (hit && fresh === undefined) model.delete(key);
        expect(cache.get(key)).toBe(fresh);
      }
      expect(cache.size).toBe(model.size);
    }
    for (const [key, { value }] of model) expect(cache.get(key, t)).toBe(t - model.get(key)!.at < 40 ? value : undefined);
  });

  it('shares one load among concurrent callers and keeps its value from when it started', async () => {
    let t = 0;
    const cache = new TtlCache<string, string | undefined>({ ttlMs: 100, now: () => t });
    let loads = 0;
    let answer!: (v: string | undefined) => void;
    const load = () => {
      loads++;
      return new Promise<string | undefined>((resolve) => (answer = resolve));
    };
    const first = cache.getOrLoad('k', load);
    const second = cache.getOrLoad('k', load);
    t = 50;
    answer(undefined);
    expect(await Promise.all([first, second])).toEqual([undefined, undefined]);
    expect(loads).toBe(1);
    // An undefined answer is remembered like any other, from t = 0.
    t = 99;
    expect(await cache.getOrLoad('k', load)).toBeUndefined();
    expect(loads).toBe(1);
    t = 100;
    const third = cache.getOrLoad('k', load);
    answer('v');
    expect(await third).toBe('v');
    expect(loads).toBe(2);
  });

  it('does not keep a failed load: the next call loads again', async () => {
    const cache = new TtlCache<string, number>({ ttlMs: 1000 });
    let fail = true;
    const load = async () => {
      if (fail) throw new Error('postgres away');
      return 5;
    };
    await expect(cache.getOrLoad('k', load)).rejects.toThrow('postgres away');
    expect(cache.size).toBe(0);
    fail = false;
    expect(await cache.getOrLoad('k', load)).toBe(5);
  });

  it('delete() drops a value and the result of a load in hand', async () => {
    const cache = new TtlCache<string, number>({ ttlMs: 1000 });
    let answer!: (v: number) => void;
    const pending = cache.getOrLoad('k', () => new Promise<number>((resolve) => (answer = resolve)));
    cache.delete('k');
    answer(1);
    expect(await pending).toBe(1);
    expect(cache.get('k')).toBeUndefined();
  });
});
