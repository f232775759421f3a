import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Pseudonyms, pseudonym } from '../../../domain/ingest/pseudonyms.js';

const hmac = (key: Parameters<typeof createHmac>[1], id: string) => createHmac('sha256', key).update(id).digest('hex').slice(0, 32);

describe('device pseudonyms, cached for recurring devices', () => {
  const a = new Pseudonyms('secret-one');
  const b = new Pseudonyms('secret-two');

  it('give the keyed HMAC, the same on every call, and another for another operator or PSEUDONYM_KEY', () => {
    const mac = '3c:22:fb:1a:2b:3c';
    const first = pseudonym(a.keyFor('op-1'), mac);
    expect(first).toBe(hmac(a.keyFor('op-1'), mac));
    expect(pseudonym(a.keyFor('op-1'), mac)).toBe(first);
    expect(pseudonym(a.keyFor('op-2'), mac)).toBe(hmac(a.keyFor('op-2'), mac));
    expect(pseudonym(a.keyFor('op-2'), mac)).not.toBe(first);
    expect(pseudonym(b.keyFor('op-1'), mac)).toBe(hmac(b.keyFor('op-1'), mac));
    expect(pseudonym(b.keyFor('op-1'), mac)).not.toBe(first);
  });

  it('stay right past the cache bound, for identifiers pushed out and new ones alike, round after round of evictions', () => {
    const key = a.keyFor('op-bound');
    // Over twice the bound (131,072): the eviction order wraps round more than once.
    const ids = Array.from({ length: 300_000 }, (_, i) => `dev-${i}`);
    for (const id of ids) pseudonym(key, id);
    for (const id of [ids[0]!, ids[1]!, ids[140_000]!, ids[262_144]!, ids[299_999]!, 'never-seen'])
      expect(pseudonym(key, id)).toBe(hmac(key, id));
    for (const id of ids.slice(-1000)) expect(pseudonym(key, id)).toBe(hmac(key, id));
  });

  it('stay right for several keys whose entries push each other out, a key with none left included', () => {
    const keys = ['op-x', 'op-y', 'op-z'].map((op) => a.keyFor(op));
    const early = b.keyFor('op-early');
    expect(pseudonym(early, 'first')).toBe(hmac(early, 'first'));
    // The early key's one entry goes first; the three keys then evict each other's, round after round.
    for (let i = 0; i < 300_000; i++) pseudonym(keys[i % 3]!, `dev-${i}`);
    expect(pseudonym(early, 'first')).toBe(hmac(early, 'first'));
    expect(pseudonym(early, 'second')).toBe(hmac(early, 'second'));
    for (const i of [0, 1, 2, 170_000, 299_997, 299_998, 299_999])
      expect(pseudonym(keys[i % 3]!, `dev-${i}`)).toBe(hmac(keys[i % 3]!, `dev-${i}`));
    // The same identifier under another key is another pseudonym, cached apart.
    expect(pseudonym(keys[1]!, 'dev-299999')).toBe(hmac(keys[1]!, 'dev-299999'));
    expect(pseudonym(keys[1]!, 'dev-299999')).not.toBe(pseudonym(keys[0]!, 'dev-299999'));
  });
});
