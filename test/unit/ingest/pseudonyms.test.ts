import { createHmac, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Pseudonyms, derivedUuid, pseudonym } from '../../../domain/ingest/pseudonyms.js';
import type { HmacSha256Key } from '../../../lib/hmac-sha256.js';

/** Each operator key's bytes as node:crypto derives them: HMAC-SHA256(PSEUDONYM_KEY, operatorId). */
const rawKeys = new Map<HmacSha256Key, Buffer>();
class Keys extends Pseudonyms {
  constructor(private readonly pseudonymKey: string) {
    super(pseudonymKey);
  }
  override keyFor(operatorId: string): HmacSha256Key {
    const key = super.keyFor(operatorId);
    rawKeys.set(key, createHmac('sha256', this.pseudonymKey).update(operatorId).digest());
    return key;
  }
}
const hmac = (key: HmacSha256Key, id: string) => createHmac('sha256', rawKeys.get(key)!).update(id).digest('hex').slice(0, 32);

describe('device pseudonyms, cached for recurring devices', () => {
  const a = new Keys('secret-one');
  const b = new Keys('secret-two');

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

describe('event ids derived from an event id or an Idempotency-Key', () => {
  /** The form ids were derived in until 2026-12-03: the digest's first 16 bytes, version and variant bits set in them. */
  function asBefore(key: Buffer, input: string): string {
    const b = createHmac('sha256', key).update(input).digest().subarray(0, 16);
    b[6] = (b[6]! & 0x0f) | 0x80;
    b[8] = (b[8]! & 0x3f) | 0x80;
    const h = b.toString('hex');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  it('are the ids derived before, so a re-delivery across an upgrade is still stored once, and are version-8 UUIDs', () => {
    const keys = new Keys('secret-ids');
    for (let i = 0; i < 5000; i++) {
      const key = keys.keyFor(`op-${i % 7}`);
      const input = `${randomUUID()}:meraki:${i % 3 === 0 ? `idempotency:${randomUUID()}:${i}` : `vendor-${i}-é`}`;
      const id = derivedUuid(key, input);
      expect(id).toBe(asBefore(rawKeys.get(key)!, input));
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(derivedUuid(key, input)).toBe(id);
    }
  });
});
