import { describe, expect, it } from 'vitest';
import { MAX_CACHED_PSEUDONYMS, Pseudonyms, pseudonym, pseudonymCacheOf } from '../../../domain/ingest/pseudonyms.js';

/**
 * The pseudonym cache shared fairly between operators (domain/ingest/pseudonyms.ts): one
 * operator's flood of new identifiers must not turn another's recurring devices into HMACs. Other
 * unit files share this worker's cache (vitest runs them without isolation), so the checks hold
 * with a few other keys' entries in it.
 */
const ps = new Pseudonyms('fairness-secret');

describe('the pseudonym cache shared between operators', () => {
  it("keeps an operator's recurring devices while another floods it with three times the bound of new identifiers", () => {
    const steady = ps.keyFor('op-steady');
    const flood = ps.keyFor('op-flood');
    const devices = Array.from({ length: 5000 }, (_, i) => `steady-${i}`);
    for (const d of devices) pseudonym(steady, d);
    const warm = pseudonymCacheOf(steady);
    expect(warm.entries).toBe(5000);
    for (let i = 0; i < 3 * MAX_CACHED_PSEUDONYMS; i++) {
      pseudonym(flood, `flood-${i}`);
      if (i % 2 === 0) pseudonym(steady, devices[(i / 2) % devices.length]!);
    }
    // Not one of the steady operator's look-ups missed, and it holds all its devices still.
    expect(pseudonymCacheOf(steady)).toEqual({ entries: 5000, misses: warm.misses });
    // The flood recycled its own share: its newest entries are cached, its oldest are gone.
    expect(pseudonymCacheOf(flood).entries).toBeGreaterThan(MAX_CACHED_PSEUDONYMS / 4);
  });

  it('lets a key alone fill the cache, and gives a newcomer room up to its fair share, taken from the key holding the most', () => {
    const first = ps.keyFor('op-first');
    const second = ps.keyFor('op-second');
    for (let i = 0; i < 2 * MAX_CACHED_PSEUDONYMS; i++) pseudonym(first, `first-${i}`);
    // Every other key went idle meanwhile (not asked in the last bound's look-ups): the first key holds the whole cache.
    expect(pseudonymCacheOf(first).entries).toBe(MAX_CACHED_PSEUDONYMS);
    // Both in use: the second takes from the first up to half, and no further.
    for (let i = 0; i < MAX_CACHED_PSEUDONYMS; i++) {
      pseudonym(second, `second-${i}`);
      pseudonym(first, `first-again-${i % 1000}`);
    }
    const half = MAX_CACHED_PSEUDONYMS / 2;
    expect(pseudonymCacheOf(second).entries).toBe(half);
    expect(pseudonymCacheOf(first).entries).toBe(half);
  });

  it("gives idle keys' entries up first, before any key in use gives its own", () => {
    const idle = ps.keyFor('op-idle');
    const busy = ps.keyFor('op-busy');
    const newcomer = ps.keyFor('op-newcomer');
    for (let i = 0; i < MAX_CACHED_PSEUDONYMS; i++) pseudonym(idle, `idle-${i}`);
    const devices = Array.from({ length: 50_000 }, (_, i) => `busy-${i}`);
    for (let round = 0; round < 3; round++) for (const d of devices) pseudonym(busy, d);
    // A newcomer's flood while the busy key keeps seeing its devices: every key but these two is idle by now.
    for (let i = 0; i < 2 * MAX_CACHED_PSEUDONYMS; i++) {
      pseudonym(newcomer, `new-${i}`);
      pseudonym(busy, devices[i % devices.length]!);
    }
    // The busy key missed each device once, on its first sighting; the idle ones gave up all their entries.
    expect(pseudonymCacheOf(busy)).toEqual({ entries: 50_000, misses: 50_000 });
    expect(pseudonymCacheOf(idle).entries).toBe(0);
    expect(pseudonymCacheOf(newcomer).entries).toBe(MAX_CACHED_PSEUDONYMS - 50_000);
  });
});
