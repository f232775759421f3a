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
});
