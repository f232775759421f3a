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
