import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

/**
 * A MAC in one canonical spelling (lower-case, colon-separated), so `AA-BB-CC-DD-EE-FF`,
 * `aabb.ccdd.eeff` and `aa:bb:cc:dd:ee:ff` give the same pseudonym. Undefined when not a MAC.
 */
export function canonicalMac(input: string): string | undefined {
  if (CANONICAL_MAC.test(input)) return input; // the usual spelling: nothing to do
  const hex = input
    .trim()
    .replace(/[:.\-\s]/g, '')
    .toLowerCase();
  if (!/^[0-9a-f]{12}$/.test(hex)) return undefined;
  return `${hex.slice(0, 2)}:${hex.slice(2, 4)}:${hex.slice(4, 6)}:${hex.slice(6, 8)}:${hex.slice(8, 10)}:${hex.slice(10)}`;
}

const CANONICAL_MAC = /^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$/;

/** A unicast, locally administered MAC (second hex digit 2, 6, a or e): a randomized, per-network one. */
export const isRandomizedMac = (canonical: string): boolean => '26ae'.includes(canonical.charAt(1));

const MAX_CACHED_OPERATORS = 10_000;

/**
 * Keyed pseudonyms: each operator gets its own key, HMAC-SHA256(PSEUDONYM_KEY, operatorId), and an
 * identifier's pseudonym is HMAC-SHA256(operator key, identifier) truncated to 128 bits (hex). Stable
 * for the same operator and identifier for as long as PSEUDONYM_KEY is kept, different across operators,
 * and not reversible without the key.
 */
export class Pseudonyms {
  private readonly keys = new Map<string, KeyObject>();

  constructor(private readonly secret: string) {}

  /** The operator's key, derived once and cached (a small bounded map). */
  keyFor(operatorId: string): KeyObject {
    let key = this.keys.get(operatorId);
    if (!key) {
      if (this.keys.size >= MAX_CACHED_OPERATORS) this.keys.delete(this.keys.keys().next().value!);
      key = createSecretKey(createHmac('sha256', this.secret).update(operatorId).digest());
      this.keys.set(operatorId, key);
    }
    return key;
  }
}

/**
 * Pseudonyms of recurring identifiers (a device is seen again and again): an HMAC costs ~3 µs, a
 * look-up ~0.1 (benchmarks/README.md#pseudonyms-cached-for-recurring-devices-2026-11-27-issue-30).
 * Bounded, oldest first out. Per key, so operators and PSEUDONYM_KEYs never share an entry. The
 * identifiers (MACs) are held in this process's memory only, as while a request is handled; never
 * written anywhere.
 */
const MAX_CACHED_PSEUDONYMS = 131_072;
/** Per key (numbered as first seen), identifier → pseudonym: no key-and-identifier string is built per look-up. */
const cachedPseudonyms = new Map<number, Map<string, string>>();
/**
 * The cached entries in the order they came, round a ring: the one under `oldest` goes first. Not
 * a Map's `keys().next()`: its iterator steps over every entry deleted since the Map last
 * rehashed, which made each eviction cost up to tens of µs once the cache was full
 * (benchmarks/README.md#the-pseudonym-cache-once-full-2026-11-28-issue-30).
 */
const orderKeys: number[] = [];
const orderIdentifiers: string[] = [];
let oldest = 0;
const keyIds = new WeakMap<KeyObject, number>();
let nextKeyId = 0;

export function pseudonym(key: KeyObject, identifier: string): string {
  let keyId = keyIds.get(key);
  if (keyId === undefined) keyIds.set(key, (keyId = nextKeyId++));
  let cached = cachedPseudonyms.get(keyId);
  if (!cached) cachedPseudonyms.set(keyId, (cached = new Map()));
  let p = cached.get(identifier);
  if (p === undefined) {
    p = createHmac('sha256', key).update(identifier).digest('hex').slice(0, 32);
    if (orderKeys.length < MAX_CACHED_PSEUDONYMS) {
      orderKeys.push(keyId);
      orderIdentifiers.push(identifier);
    } else {
      const of = cachedPseudonyms.get(orderKeys[oldest]!)!;
      of.delete(orderIdentifiers[oldest]!);
      if (of.size === 0 && of !== cached) cachedPseudonyms.delete(orderKeys[oldest]!);
      orderKeys[oldest] = keyId;
      orderIdentifiers[oldest] = identifier;
      oldest = (oldest + 1) % MAX_CACHED_PSEUDONYMS;
    }
    cached.set(identifier, p);
  }
  return p;
}

/** A UUID (version 8, RFC 9562) derived from a keyed hash: the same input always gives the same id. */
export function derivedUuid(key: KeyObject, input: string): string {
  const b = createHmac('sha256', key).update(input).digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x80;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
