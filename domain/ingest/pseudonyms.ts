import { createHmac } from 'node:crypto';
import { HmacSha256Key, hex16, hex32 } from '../../lib/hmac-sha256.js';

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
  private readonly keys = new Map<string, HmacSha256Key>();

  constructor(private readonly secret: string) {}

  /** The operator's key, derived once and cached (a small bounded map). */
  keyFor(operatorId: string): HmacSha256Key {
    let key = this.keys.get(operatorId);
    if (!key) {
      if (this.keys.size >= MAX_CACHED_OPERATORS) this.keys.delete(this.keys.keys().next().value!);
      key = new HmacSha256Key(createHmac('sha256', this.secret).update(operatorId).digest());
      this.keys.set(operatorId, key);
    }
    return key;
  }
}

/**
 * Pseudonyms of recurring identifiers (a device is seen again and again): an HMAC costs ~1.5 µs, a
 * look-up ~0.1 (benchmarks/README.md#pseudonyms-cached-for-recurring-devices-2026-11-27-issue-30).
 * Per key, so operators and PSEUDONYM_KEYs never share an entry. The identifiers (MACs) are held in
 * this process's memory only, as while a request is handled; never written anywhere.
 *
 * Bounded, and shared fairly between keys (docs/decisions.md, "Capacity per core"; benchmarks/README.md,
 * "The pseudonym cache shared fairly between operators"):
 * a key alone may fill the whole cache, but once it is full a new entry pushes out, in this order,
 * the oldest entry of an idle key (one not asked for in the last MAX_CACHED_PSEUDONYMS look-ups:
 * idleness counted in look-ups, so it scales with the pressure on the cache); else the asking key's
 * own oldest when it holds its fair share (the bound over the keys in use) or more; else the oldest
 * of the key in use holding the most. So one operator sending ever new identifiers (randomized
 * MACs, a flood) recycles its own share and cannot push out the recurring devices of operators
 * within theirs: their sightings stay look-ups, not HMACs.
 */
export const MAX_CACHED_PSEUDONYMS = 131_072;
/** Evictions between two counts of the keys in use, the idle and the largest ones (O(keys) each: amortised O(1)). */
const RECOUNT_EVICTIONS = 1024;

/** One key's entries: identifier → pseudonym, and the identifiers oldest first from `head` on. */
interface KeyEntries {
  key: HmacSha256Key;
  pseudonyms: Map<string, string>;
  order: string[];
  head: number;
  /** The look-up count when this key was last asked for. */
  usedAt: number;
  misses: number;
}

const cachedPseudonyms = new Map<HmacSha256Key, KeyEntries>();
let cachedCount = 0;
let lookups = 0;
/** As last counted: the entries of each key in use are fair up to `fairShare`; `taken` gives the entries others need. */
let fairShare = MAX_CACHED_PSEUDONYMS;
let taken: KeyEntries | undefined;
let takenIdle = false;
let sinceCount = 0;

/** Pushes out `of`'s oldest entry. */
function evictOldest(of: KeyEntries): void {
  of.pseudonyms.delete(of.order[of.head++]!);
  cachedCount--;
  // Consumed places are dropped once they are most of the array: each costs O(1) amortised.
  if (of.head > 1024 && of.head * 2 > of.order.length) {
    of.order = of.order.slice(of.head);
    of.head = 0;
  }
  if (of.pseudonyms.size === 0) {
    cachedPseudonyms.delete(of.key);
    if (taken === of) taken = undefined;
  }
}

const isIdle = (e: KeyEntries) => lookups - e.usedAt > MAX_CACHED_PSEUDONYMS;

/** Counts the keys in use (their fair share), and picks the key others take from: the largest idle one, else the largest in use. */
function recount(): void {
  let inUse = 0;
  let largestIdle: KeyEntries | undefined;
  let largestInUse: KeyEntries | undefined;
  for (const e of cachedPseudonyms.values()) {
    if (isIdle(e)) {
      if (!largestIdle || e.pseudonyms.size > largestIdle.pseudonyms.size) largestIdle = e;
    } else {
      inUse++;
      if (!largestInUse || e.pseudonyms.size > largestInUse.pseudonyms.size) largestInUse = e;
    }
  }
  fairShare = Math.floor(MAX_CACHED_PSEUDONYMS / Math.max(1, inUse));
  taken = largestIdle ?? largestInUse;
  takenIdle = largestIdle !== undefined;
  sinceCount = 0;
}

/**
 * The key whose oldest entry makes room for one more of `asking`'s. Between counts the key taken
 * from may shrink to the asking key's size: the asking key then gives its own, at most
 * RECOUNT_EVICTIONS entries off the fair split, so that keys of one size never count on every miss.
 */
function victim(asking: KeyEntries): KeyEntries {
  if (++sinceCount >= RECOUNT_EVICTIONS || !taken || taken === asking) recount();
  if (!taken || taken === asking) return asking;
  if (takenIdle) return taken;
  return asking.pseudonyms.size >= fairShare || taken.pseudonyms.size <= asking.pseudonyms.size ? asking : taken;
}

export function pseudonym(key: HmacSha256Key, identifier: string): string {
  let entries = cachedPseudonyms.get(key);
  if (!entries) cachedPseudonyms.set(key, (entries = { key, pseudonyms: new Map(), order: [], head: 0, usedAt: 0, misses: 0 }));
  entries.usedAt = ++lookups;
  let p = entries.pseudonyms.get(identifier);
  if (p === undefined) {
    p = key.hex(identifier, 32);
    entries.misses++;
    if (cachedCount >= MAX_CACHED_PSEUDONYMS) evictOldest(victim(entries));
    // The asking key's own last entry may just have gone: it is cached again under its key.
    if (!cachedPseudonyms.has(key)) cachedPseudonyms.set(key, entries);
    entries.pseudonyms.set(identifier, p);
    entries.order.push(identifier);
    cachedCount++;
  }
  return p;
}

/** What the cache holds for `key`: its entries, and its look-ups that missed (an HMAC each) while it had entries. */
export function pseudonymCacheOf(key: HmacSha256Key): { entries: number; misses: number } {
  const e = cachedPseudonyms.get(key);
  return { entries: e?.pseudonyms.size ?? 0, misses: e?.misses ?? 0 };
}

/**
 * A UUID (version 8, RFC 9562) derived from a keyed hash: the same input always gives the same id.
 * The hash's first 128 bits, with the version (8) and the variant (binary 10) in their places.
 */
export function derivedUuid(key: HmacSha256Key, input: string): string {
  const w = key.words(input);
  const w1 = w[1]!;
  const w2 = w[2]!;
  return `${hex32(w[0]!)}-${hex16(w1 >>> 16)}-${hex16((w1 & 0x0fff) | 0x8000)}-${hex16(((w2 >>> 16) & 0x3fff) | 0x8000)}-${hex16(w2)}${hex32(w[3]!)}`;
}
