import { applyEffect, type FlowEffect } from '../../../domain/analytics/occupancy-rule.js';
import { nextPeriodStart } from '../../../domain/telemetry/calendar.js';

/**
 * The occupancy processor's model (docs/processors.md#occupancy): a scope (the venue, or an area
 * or counter zone) holds its current period's flows in chunks of one minute of event time, each
 * with its flows in the rule's order and their composed effect; the figure is the fold of the
 * chunk effects from 0 at the period start.
 */

/** Event time per chunk: a late flow re-folds its own chunk (and folds the chunks after it). */
export const CHUNK_MS = 60_000;
/**
 * Flows held per scope and period. Beyond it the oldest chunks drop their flows and keep their
 * effect (a summary of five numbers): at ~450 door events/s that is the last ~4 minutes exact for
 * a flow hours late, while flows arriving in order stay exact at any rate. ~16 bytes per flow in
 * memory, ~3 in the changelog: a scope holds at most ~2 MB, a chunk entry stays under the broker's
 * 1 MB.
 */
export const MAX_PERIOD_FLOWS = 100_000;
/**
 * A chunk whose changelog entry could exceed this keeps only its effect too (a record must stay
 * under the broker's 1 MB; derived ids take 16 bytes each): some 100,000 flows in one minute.
 */
const MAX_CHUNK_BYTES = 512 * 1024;
/** A chunk keeps its fold state every this many flows (in memory): a flow inserted near its end re-folds at most this many before it. */
const CHECKPOINT_FLOWS = 64;
/** Amounts are bounded by ingest (≤ 1,000,000); this only keeps an absurd one a safe integer in the changelog encoding. */
export const MAX_AMOUNT = 2 ** 40;

/**
 * One minute of a scope's period. Flows are held as two columns, sorted in `compareFlows` order:
 * `keys` = (ms into the chunk) × 2 + (0 for a count, 1 for a flow), ascending; `amounts`
 * descending among equal keys. Flows equal in both are interchangeable (same effect), so their
 * order among themselves, which `compareFlows` breaks by event id, does not matter and ids are not
 * kept, except the derived ones (`ids`), which may come again.
 *
 * The fold state of a run of flows, from a figure x: before its first count the flows sum to `sum`
 * with lowest prefix `low` (≤ 0), taking max(0, −low − x) people below 0; from its first count on
 * (`counted`) the figure is `value` whatever x was, with `after` clamped meanwhile. As a
 * `FlowEffect`: counted ? (−∞, value) : (sum, sum − low).
 */
export class Chunk {
  keys: number[] = [];
  amounts: number[] = [];
  ids: Set<string> | null = null;
  /** The flows were dropped (MAX_PERIOD_FLOWS): only the fold state and the last flow's place remain. */
  dropped = false;
  counted = false;
  sum = 0;
  low = 0;
  value = 0;
  after = 0;
  /** Of a dropped chunk: its last flow's key and amount (a flow sorting after it is still appended exactly). */
  lastKey = -1;
  lastAmount = 0;
  /** Fold state before flow i × CHECKPOINT_FLOWS, five numbers each (in memory). */
  checkpoints: number[] = [0, 0, 0, 0, 0];
  /** The lowest index changed since the fold state was computed. */
  dirtyFrom = Infinity;
  /** An upper bound of the flows' and ids' size in the changelog entry. */
  bytes = 0;
  encoded: Buffer | null = null;

  constructor(
    readonly minute: number,
    readonly key: string,
  ) {}

  effect(): FlowEffect {
    return this.counted ? { add: -Infinity, floor: this.value } : { add: this.sum, floor: this.sum - this.low };
  }

  /** Folds the flows from the last checkpoint at or before the first change. */
  refold(): void {
    if (this.dirtyFrom === Infinity) return;
    const { keys, amounts, checkpoints: cp } = this;
    const n = keys.length;
    const j = Math.min(Math.floor(this.dirtyFrom / CHECKPOINT_FLOWS), cp.length / 5 - 1);
    let counted = cp[j * 5]!;
    let sum = cp[j * 5 + 1]!;
    let low = cp[j * 5 + 2]!;
    let value = cp[j * 5 + 3]!;
    let after = cp[j * 5 + 4]!;
    cp.length = (j + 1) * 5;
    for (let i = j * CHECKPOINT_FLOWS; i < n; i++) {
      if (i % CHECKPOINT_FLOWS === 0 && i > j * CHECKPOINT_FLOWS) cp.push(counted, sum, low, value, after);
      const a = amounts[i]!;
      if ((keys[i]! & 1) === 0) {
        counted = 1;
        value = a;
      } else if (counted === 0) {
        sum += a;
        if (sum < low) low = sum;
      } else {
        value += a;
        if (value < 0) {
          after -= value;
          value = 0;
        }
      }
    }
    if (n % CHECKPOINT_FLOWS === 0 && n > j * CHECKPOINT_FLOWS) cp.push(counted, sum, low, value, after);
    this.counted = counted === 1;
    this.sum = sum;
    this.low = low;
    this.value = value;
    this.after = after;
    this.dirtyFrom = Infinity;
  }

  /** Applies a flow at the end of the fold state (a dropped chunk). */
  step(key: number, a: number): void {
    if ((key & 1) === 0) {
      this.counted = true;
      this.value = a;
    } else if (!this.counted) {
      this.sum += a;
      if (this.sum < this.low) this.low = this.sum;
    } else {
      this.value += a;
      if (this.value < 0) {
        this.after -= this.value;
        this.value = 0;
      }
    }
  }

  /** Keeps only the fold state (MAX_PERIOD_FLOWS); returns the flows dropped. */
  drop(): number {
    this.refold();
    const n = this.keys.length;
    this.lastKey = this.keys[n - 1]!;
    this.lastAmount = this.amounts[n - 1]!;
    this.keys = [];
    this.amounts = [];
    this.ids = null;
    this.checkpoints = [0, 0, 0, 0, 0];
    this.bytes = 0;
    this.dropped = true;
    this.encoded = null;
    return n;
  }
}

/** Bytes of an amount as a zigzag varint, plus at most 3 for its key's delta (keys are below 120,000). */
export const flowBytes = (amount: number) => {
  let z = amount >= 0 ? amount * 2 : -amount * 2 - 1;
  let n = 4;
  while (z >= 128) {
    z = Math.floor(z / 128);
    n++;
  }
  return n;
};
export const ID_BYTES = 16;

/** True when (key, amount) sorts at or after (k, a). */
const sortsAfter = (key: number, amount: number, k: number, a: number) => key > k || (key === k && amount <= a);

export interface Scope {
  /** `<venue>|<zone>` (zone empty for the venue). */
  key: string;
  venueId: string;
  zoneId: string | null;
  /** False for a scope seen only through chunk entries during a restore (its head not (yet) read). */
  live: boolean;
  operatorId: string;
  timezone: string;
  resetHour: number;
  /** Start of the current reset period. */
  period: number;
  /** The figure last emitted, its time, and the period's clamp total as of then. */
  value: number;
  ts: number;
  clampsAt: number;
  chunks: Map<number, Chunk>;
  /** The chunks by minute, and the figure and clamp total after each (in memory). */
  list: Chunk[];
  after: number[];
  clampsAfter: number[];
  /** The first minute whose chunk changed since the last fold. */
  foldFrom: number;
  dirty: Set<Chunk>;
  /** Flows held (not dropped). */
  flows: number;
  /** End of the current period for the settings held (NaN: not computed). */
  end: number;
}

export interface OccupancyState {
  scopes: Map<string, Scope>;
  /** Scopes restored since the last batch or tick: checked and sorted before use. */
  restored: Set<Scope>;
  /** Entries to write with the next batch or tick (a restore's clean-up, an old-layout entry moved). */
  pending: Set<string>;
}

export const scopeKey = (venueId: string, zoneId: string | null) => `${venueId}|${zoneId ?? ''}`;
export const CHUNK_MARK = '|#';

export function newScope(key: string): Scope {
  const bar = key.indexOf('|');
  const zone = key.slice(bar + 1);
  return {
    key,
    venueId: key.slice(0, bar),
    zoneId: zone === '' ? null : zone,
    live: false,
    operatorId: '',
    timezone: 'UTC',
    resetHour: 0,
    period: 0,
    value: 0,
    ts: 0,
    clampsAt: 0,
    chunks: new Map(),
    list: [],
    after: [],
    clampsAfter: [],
    foldFrom: Infinity,
    dirty: new Set(),
    flows: 0,
    end: NaN,
  };
}

export function endOf(s: Scope): number {
  if (Number.isNaN(s.end)) s.end = nextPeriodStart(s.period, s.resetHour, s.timezone);
  return s.end;
}

/** First index of `list` whose minute is ≥ `minute`. */
function chunkIndex(list: Chunk[], minute: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid]!.minute < minute) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function chunkOf(s: Scope, minute: number): Chunk {
  let c = s.chunks.get(minute);
  if (c) return c;
  c = new Chunk(minute, `${s.key}${CHUNK_MARK}${minute}`);
  s.chunks.set(minute, c);
  if (s.list.length === 0 || s.list[s.list.length - 1]!.minute < minute) s.list.push(c);
  else s.list.splice(chunkIndex(s.list, minute), 0, c);
  return c;
}

/** The figure and the period's clamp total after all its flows, re-folding what changed. */
export function figure(s: Scope): { value: number; clamps: number } {
  if (s.foldFrom !== Infinity) {
    for (const c of s.dirty) c.refold();
    s.dirty.clear();
    const from = chunkIndex(s.list, s.foldFrom);
    let x = from > 0 ? s.after[from - 1]! : 0;
    let clamps = from > 0 ? s.clampsAfter[from - 1]! : 0;
    s.after.length = from;
    s.clampsAfter.length = from;
    for (let i = from; i < s.list.length; i++) {
      const c = s.list[i]!;
      // What the chunk's flows before its first count take below 0 from x, then what they take after it.
      clamps += Math.max(0, -c.low - x) + c.after;
      x = applyEffect(x, c.effect());
      s.after.push(x);
      s.clampsAfter.push(clamps);
    }
    s.foldFrom = Infinity;
  }
  const n = s.list.length;
  return n === 0 ? { value: 0, clamps: 0 } : { value: s.after[n - 1]!, clamps: s.clampsAfter[n - 1]! };
}

/** Starts period `p`: the figure restarts at 0, the previous period's chunks are deleted. */
export function startPeriod(s: Scope, p: number, changed: Set<string>): void {
  for (const c of s.list) changed.add(c.key);
  s.chunks.clear();
  s.list = [];
  s.after = [];
  s.clampsAfter = [];
  s.dirty.clear();
  s.foldFrom = Infinity;
  s.flows = 0;
  s.period = p;
  s.end = NaN;
  s.value = 0;
  s.ts = p;
  s.clampsAt = 0;
  changed.add(s.key);
}

/** Keeps at most `max` flows: the oldest chunks keep only their effect. */
export function bound(s: Scope, max: number, changed: Set<string>): void {
  for (let i = 0; s.flows > max && i < s.list.length; i++) {
    const c = s.list[i]!;
    if (c.dropped || c.keys.length === 0) continue;
    s.flows -= c.drop();
    changed.add(c.key);
  }
}

export type Placed = 'exact' | 'duplicate' | 'approximated';

/** Places a flow in its chunk (`derivedId`: the event's id when it may come again). */
export function place(s: Scope, ts: number, absolute: boolean, amount: number, derivedId: string | null): { placed: Placed; chunk: Chunk } {
  const minute = Math.floor(ts / CHUNK_MS);
  const c = chunkOf(s, minute);
  const key = (ts - minute * CHUNK_MS) * 2 + (absolute ? 0 : 1);
  let placed: Placed = 'exact';
  if (c.dropped) {
    // Its flows are gone: applied at its end, exact when it sorts there anyway (and cannot be a re-delivery).
    if (sortsAfter(key, amount, c.lastKey, c.lastAmount)) {
      c.lastKey = key;
      c.lastAmount = amount;
      if (derivedId !== null) placed = 'approximated';
    } else placed = 'approximated';
    c.step(key, amount);
  } else {
    if (derivedId !== null) {
      if (c.ids?.has(derivedId)) return { placed: 'duplicate', chunk: c };
      (c.ids ??= new Set()).add(derivedId);
      c.bytes += ID_BYTES;
    }
    const { keys, amounts } = c;
    const n = keys.length;
    let at = n;
    if (n > 0 && !sortsAfter(key, amount, keys[n - 1]!, amounts[n - 1]!)) {
      // After every flow it sorts at or after.
      let lo = 0;
      let hi = n;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (sortsAfter(key, amount, keys[mid]!, amounts[mid]!)) lo = mid + 1;
        else hi = mid;
      }
      at = lo;
    }
    if (at === n) {
      keys.push(key);
      amounts.push(amount);
    } else {
      keys.splice(at, 0, key);
      amounts.splice(at, 0, amount);
    }
    if (at < c.dirtyFrom) c.dirtyFrom = at;
    s.dirty.add(c);
    s.flows++;
    c.bytes += flowBytes(amount);
    if (c.bytes > MAX_CHUNK_BYTES) s.flows -= c.drop();
  }
  c.encoded = null;
  if (minute < s.foldFrom) s.foldFrom = minute;
  return { placed, chunk: c };
}
