import { z } from 'zod';
import type { Queryable } from '../../postgres/client.js';
import { decodeStateEntry, encodeOccupancyUpdate, type CanonicalEvent, type OccupancyUpdate } from '../../lib/events.js';
import { nextPeriodStart, periodStart } from '../../domain/telemetry/calendar.js';
import { applyEffect, flowOf, type FlowEffect } from '../../domain/analytics/occupancy-rule.js';
import { eventsOfTypes, type Effects, type InputMessage, type Processor, type ProcessorContext } from './runtime.js';
import { VenueInfos, type VenueInfo, type VenueLookup } from './venues.js';

/**
 * Live occupancy per venue and per area/counter zone (docs/processors.md#occupancy): the occupancy
 * rule (domain/analytics/occupancy-rule.ts) applied to every event of the scope's current reset
 * period, whatever order, delay, batching or duplication they arrived with.
 *
 * - The venue's count takes events with no zone or at an `entrance`/`exit` zone; an `area` or
 *   `counter` zone's count takes events at that zone only.
 * - Clock per scope: a scope's current period is the reset period (the venue's
 *   `occupancy_reset_hour`, local time, DST-correct) of the newest event seen for it. An event of
 *   a period that had ended when ingest received it is skipped (`earlier_day`). An event of a
 *   later period starts that period (a `reset` update at its start, the figure from 0); once the
 *   processor is caught up, the wall clock does the same for a scope whose period has ended. An
 *   event of an earlier period is skipped (`earlier_day`: that day's history is derived from the
 *   raw table).
 * - Within the period every event is placed in the rule's order however late it comes: the
 *   period's flows are held per scope in chunks of one minute of event time (`CHUNK_MS`), each
 *   with its flows sorted and their composed effect; the figure is the fold of the chunk effects
 *   from 0 at the period start. A flow re-folds its chunk from the nearest checkpoint before it and
 *   the chunks after its own: in-order traffic appends, at a constant cost per event.
 * - Each chunk is its own changelog entry (`<venue>|<zone>|#<minute>`, binary), beside one head
 *   entry per scope (`<venue>|<zone>`, a JSON array): a commit rewrites the chunks that changed.
 *   A period's chunks are deleted when it ends.
 * - At most `MAX_PERIOD_FLOWS` flows are held per scope; beyond that the oldest chunks keep only
 *   their effect, and a flow that would land inside such a chunk is applied at its end
 *   (`approximated`).
 * - A re-delivered event (an id derived from a connector's event id or an Idempotency-Key, not a
 *   random v4 uuid) already held in its chunk is skipped (`duplicate`).
 * - The events of one message (one ingest request) are applied together: one update per scope
 *   they changed, with the figure after them (a reset in between is emitted between the figure
 *   before it and the one after).
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
const MAX_AMOUNT = 2 ** 40;
const FLOW_TYPES = new Set(['entry', 'exit', 'occupancy'] as const);

/** Why an event is not, or not exactly, reflected in live occupancy. */
export type UnreflectedReason = 'earlier_day' | 'duplicate' | 'approximated';

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
class Chunk {
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
const flowBytes = (amount: number) => {
  let z = amount >= 0 ? amount * 2 : -amount * 2 - 1;
  let n = 4;
  while (z >= 128) {
    z = Math.floor(z / 128);
    n++;
  }
  return n;
};
const ID_BYTES = 16;

/** True when (key, amount) sorts at or after (k, a). */
const sortsAfter = (key: number, amount: number, k: number, a: number) => key > k || (key === k && amount <= a);

interface Scope {
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

const scopeKey = (venueId: string, zoneId: string | null) => `${venueId}|${zoneId ?? ''}`;
const CHUNK_MARK = '|#';

function newScope(key: string): Scope {
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

function endOf(s: Scope): number {
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

function chunkOf(s: Scope, minute: number): Chunk {
  let c = s.chunks.get(minute);
  if (c) return c;
  c = new Chunk(minute, `${s.key}${CHUNK_MARK}${minute}`);
  s.chunks.set(minute, c);
  if (s.list.length === 0 || s.list[s.list.length - 1]!.minute < minute) s.list.push(c);
  else s.list.splice(chunkIndex(s.list, minute), 0, c);
  return c;
}

/** The figure and the period's clamp total after all its flows, re-folding what changed. */
function figure(s: Scope): { value: number; clamps: number } {
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
function startPeriod(s: Scope, p: number, changed: Set<string>): void {
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
function bound(s: Scope, max: number, changed: Set<string>): void {
  for (let i = 0; s.flows > max && i < s.list.length; i++) {
    const c = s.list[i]!;
    if (c.dropped || c.keys.length === 0) continue;
    s.flows -= c.drop();
    changed.add(c.key);
  }
}

type Placed = 'exact' | 'duplicate' | 'approximated';

/** Places a flow in its chunk (`derivedId`: the event's id when it may come again). */
function place(s: Scope, ts: number, absolute: boolean, amount: number, derivedId: string | null): { placed: Placed; chunk: Chunk } {
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

/*
 * Changelog values. A head is a JSON array (an entry of the layout before chunks is a JSON
 * object); a chunk is binary: format byte, flags (1 dropped, 2 counted), for a dropped chunk its
 * fold state and last flow, then the flows (key delta, amount) and the derived ids (16 bytes each),
 * numbers as (zigzag) varints.
 */
const HEAD_FORMAT = 1;
const CHUNK_FORMAT = 1;

function encodeHead(s: Scope): Buffer {
  return Buffer.from(JSON.stringify([HEAD_FORMAT, s.operatorId, s.timezone, s.resetHour, s.period, s.value, s.ts, s.clampsAt]));
}

const headSchema = z.tuple([z.literal(HEAD_FORMAT), z.string(), z.string(), z.number(), z.number(), z.number(), z.number(), z.number()]);

/** A scope entry of the layout before chunks (its window is not needed: `value` is the figure after it). */
const oldScopeSchema = z.object({ operatorId: z.string(), timezone: z.string(), resetHour: z.number(), value: z.number(), ts: z.number(), period: z.number() });

let scratch = Buffer.allocUnsafe(64 * 1024);

class Writer {
  at = 0;
  constructor(size: number) {
    if (scratch.length < size) scratch = Buffer.allocUnsafe(Math.max(size, scratch.length * 2));
  }
  byte(b: number): void {
    scratch[this.at++] = b;
  }
  /** A non-negative safe integer. */
  uint(v: number): void {
    while (v >= 128) {
      scratch[this.at++] = (v % 128) + 128;
      v = Math.floor(v / 128);
    }
    scratch[this.at++] = v;
  }
  int(v: number): void {
    this.uint(v >= 0 ? v * 2 : -v * 2 - 1);
  }
  uuid(id: string): void {
    this.at += scratch.write(id.replace(/-/g, ''), this.at, 'hex');
  }
  done(): Buffer {
    return Buffer.from(scratch.subarray(0, this.at));
  }
}

class Reader {
  at = 0;
  constructor(readonly buf: Buffer) {}
  byte(): number {
    if (this.at >= this.buf.length) throw new Error('chunk entry truncated');
    return this.buf[this.at++]!;
  }
  uint(): number {
    let v = 0;
    let scale = 1;
    for (;;) {
      const b = this.byte();
      v += (b & 127) * scale;
      if (b < 128) return v;
      scale *= 128;
    }
  }
  int(): number {
    const z = this.uint();
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
  }
  uuid(): string {
    if (this.at + 16 > this.buf.length) throw new Error('chunk entry truncated');
    const h = this.buf.toString('hex', this.at, (this.at += 16));
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
}

function encodeChunk(c: Chunk): Buffer {
  if (c.encoded) return c.encoded;
  const n = c.keys.length;
  const w = new Writer(64 + n * 16 + (c.ids?.size ?? 0) * 16);
  w.byte(CHUNK_FORMAT);
  w.byte((c.dropped ? 1 : 0) | (c.counted ? 2 : 0));
  if (c.dropped) {
    w.int(c.sum);
    w.int(c.low);
    w.int(c.value);
    w.int(c.after);
    w.uint(c.lastKey);
    w.int(c.lastAmount);
  }
  w.uint(n);
  let prev = 0;
  for (let i = 0; i < n; i++) {
    w.uint(c.keys[i]! - prev);
    prev = c.keys[i]!;
    w.int(c.amounts[i]!);
  }
  w.uint(c.ids?.size ?? 0);
  for (const id of c.ids ?? []) w.uuid(id);
  return (c.encoded = w.done());
}

function decodeChunk(value: Buffer, minute: number, key: string): Chunk {
  const r = new Reader(value);
  if (r.byte() !== CHUNK_FORMAT) throw new Error('unknown chunk entry format');
  const flags = r.byte();
  const c = new Chunk(minute, key);
  if (flags & 1) {
    c.dropped = true;
    c.counted = (flags & 2) !== 0;
    c.sum = r.int();
    c.low = r.int();
    c.value = r.int();
    c.after = r.int();
    c.lastKey = r.uint();
    c.lastAmount = r.int();
  }
  const n = r.uint();
  let prev = 0;
  for (let i = 0; i < n; i++) {
    prev += r.uint();
    c.keys.push(prev);
    const a = r.int();
    c.amounts.push(a);
    c.bytes += flowBytes(a);
  }
  const ids = r.uint();
  if (ids > 0) c.ids = new Set();
  for (let i = 0; i < ids; i++) c.ids!.add(r.uuid());
  c.bytes += ids * ID_BYTES;
  if (!c.dropped) {
    c.dirtyFrom = 0;
    c.refold();
  }
  c.encoded = Buffer.from(value);
  return c;
}

interface Change {
  scope: { venueId: string; zoneId: string | null; operatorId: string };
  capacity: number | null;
  info: VenueInfo;
  ts: number;
  absolute: boolean;
  amount: number;
}

/** The change an event makes to occupancy, or undefined when it makes none. */
async function changeOf(e: CanonicalEvent, venues: VenueLookup, known: Map<string, VenueInfo>, reloaded: Set<string>): Promise<Change | undefined> {
  if (e.type !== 'entry' && e.type !== 'exit' && e.type !== 'occupancy') return undefined;
  const flow = flowOf(e.type, e.metrics);
  if (!flow) return undefined;
  const absolute = flow.absolute;
  const amount = Math.max(-MAX_AMOUNT, Math.min(MAX_AMOUNT, flow.amount)) || 0;
  let info = known.get(e.venueId);
  // A zone the cached venue does not list reloads it (a zone created a moment ago).
  if (e.zoneId && info && !info.zones.some((z) => z.id === e.zoneId)) info = await venues.withZone(e.venueId, e.zoneId, known, reloaded);
  if (!info || !info.is_active || info.operator_id !== e.operatorId) return undefined;
  if (!e.zoneId) return { scope: { venueId: e.venueId, zoneId: null, operatorId: e.operatorId }, capacity: null, info, ts: e.ts, absolute, amount };
  const zone = info.zones.find((z) => z.id === e.zoneId);
  if (!zone) return undefined; // deleted since ingest: its events no longer count anywhere
  if (zone.type === 'entrance' || zone.type === 'exit') {
    return { scope: { venueId: e.venueId, zoneId: null, operatorId: e.operatorId }, capacity: null, info, ts: e.ts, absolute, amount };
  }
  return { scope: { venueId: e.venueId, zoneId: zone.id, operatorId: e.operatorId }, capacity: zone.capacity, info, ts: e.ts, absolute, amount };
}

/** Random (version 4) event ids never come again; other ids are derived from a connector's event id or an Idempotency-Key and repeat on a re-delivery. */
const isDerivedId = (id: string) => id[14] !== '4';

export interface OccupancyProcessorOptions {
  /** Venue contexts from Postgres (unless `venues` is given). */
  db?: Queryable;
  inputTopic: string;
  outputTopic: string;
  contextTtlMs?: number;
  /** Where venue contexts come from (default: `VenueInfos` over `db`); tests pass their own. */
  venues?: VenueLookup;
  /** Called (after each batch, per venue and reason) with the events not, or not exactly, reflected in live occupancy. */
  unreflected?: (venueId: string, reason: UnreflectedReason, count: number) => void;
  /** Flows held per scope (default MAX_PERIOD_FLOWS). */
  maxPeriodFlows?: number;
}

export function createOccupancyProcessor(opts: OccupancyProcessorOptions): Processor<OccupancyState> {
  const venues = opts.venues ?? (opts.db ? new VenueInfos(opts.db, opts.contextTtlMs) : undefined);
  if (!venues) throw new Error('the occupancy processor needs `db` or `venues`');
  const maxFlows = opts.maxPeriodFlows ?? MAX_PERIOD_FLOWS;

  const update = (s: Scope, capacity: number | null, ts: number, reason: OccupancyUpdate['reason'], clamped: number): OccupancyUpdate => ({
    operatorId: s.operatorId,
    venueId: s.venueId,
    zoneId: s.zoneId,
    value: s.value,
    capacity,
    percent: capacity ? Math.round((s.value / capacity) * 10_000) / 100 : null,
    ts,
    reason,
    clamped,
  });

  const capacityOf = (s: Scope, known: Map<string, VenueInfo>): number | null =>
    s.zoneId ? (known.get(s.venueId)?.zones.find((z) => z.id === s.zoneId)?.capacity ?? null) : null;

  /**
   * Before a batch or tick: what the restore left is made consistent (a scope without head and a
   * chunk outside its period are dropped and deleted), and entries to (re)write are returned.
   */
  const settle = (state: OccupancyState): Set<string> => {
    const changed = new Set(state.pending);
    state.pending.clear();
    for (const s of state.restored) {
      if (state.scopes.get(s.key) !== s) continue;
      if (!s.live) {
        for (const c of s.chunks.values()) changed.add(c.key);
        state.scopes.delete(s.key);
        continue;
      }
      s.list = [];
      for (const c of s.chunks.values()) {
        if (c.minute * CHUNK_MS < s.period) {
          s.chunks.delete(c.minute);
          changed.add(c.key);
        } else s.list.push(c);
      }
      s.list.sort((a, b) => a.minute - b.minute);
      s.flows = s.list.reduce((n, c) => n + c.keys.length, 0);
      s.after = [];
      s.clampsAfter = [];
      s.dirty.clear();
      s.foldFrom = s.list.length > 0 ? s.list[0]!.minute : Infinity;
      s.end = NaN;
    }
    state.restored.clear();
    return changed;
  };

  return {
    name: 'occupancy',
    // Live figures (/ws, alarms): held at most half a second, where most partitions see a batch or two.
    commitIntervalMs: 500,
    inputs: [opts.inputTopic],
    createState: () => ({ scopes: new Map(), restored: new Set(), pending: new Set() }),

    restore(state, key, value) {
      const mark = key.indexOf(CHUNK_MARK);
      const sk = mark < 0 ? key : key.slice(0, mark);
      let s = state.scopes.get(sk);
      if (!s) {
        if (value === null) return;
        state.scopes.set(sk, (s = newScope(sk)));
      }
      state.restored.add(s);
      if (mark >= 0) {
        const minute = Number(key.slice(mark + CHUNK_MARK.length));
        s.chunks.delete(minute);
        if (value === null) return;
        try {
          s.chunks.set(minute, decodeChunk(value, minute, key));
        } catch {
          state.pending.add(key); // unreadable: deleted
        }
        return;
      }
      if (value === null) {
        s.live = false;
        return;
      }
      if (value[0] === 0x5b /* [ */) {
        const head = headSchema.safeParse(JSON.parse(value.toString('utf8')));
        if (!head.success) {
          s.live = false;
          state.pending.add(key);
          return;
        }
        const [, operatorId, timezone, resetHour, period, v, ts, clampsAt] = head.data;
        Object.assign(s, { live: true, operatorId, timezone, resetHour, period, value: v, ts, clampsAt });
        return;
      }
      // The layout before chunks: the scope goes on in its period from its last figure, taken as a
      // count at that figure's time (later flows move it; earlier late ones are covered by it).
      let old: z.infer<typeof oldScopeSchema> | null = null;
      try {
        old = decodeStateEntry(oldScopeSchema, value);
      } catch {
        old = null;
      }
      if (!old) {
        s.live = false;
        state.pending.add(key);
        return;
      }
      Object.assign(s, { live: true, operatorId: old.operatorId, timezone: old.timezone, resetHour: old.resetHour, period: old.period, value: old.value, ts: old.ts, clampsAt: 0 });
      for (const c of s.chunks.values()) state.pending.add(c.key);
      s.chunks.clear();
      const ts = Math.max(old.ts, old.period);
      const minute = Math.floor(ts / CHUNK_MS);
      const c = new Chunk(minute, `${sk}${CHUNK_MARK}${minute}`);
      c.keys.push((ts - minute * CHUNK_MS) * 2);
      c.amounts.push(Math.min(MAX_AMOUNT, Math.max(0, Math.round(old.value))));
      c.bytes = flowBytes(c.amounts[0]!);
      c.dirtyFrom = 0;
      c.refold();
      s.chunks.set(minute, c);
      state.pending.add(c.key);
      state.pending.add(key);
    },

    entry(state, key) {
      const mark = key.indexOf(CHUNK_MARK);
      if (mark < 0) {
        const s = state.scopes.get(key);
        return s?.live ? encodeHead(s) : null;
      }
      const c = state.scopes.get(key.slice(0, mark))?.chunks.get(Number(key.slice(mark + CHUNK_MARK.length)));
      return c ? encodeChunk(c) : null;
    },

    size(state) {
      let n = 0;
      for (const s of state.scopes.values()) n += (s.live ? 1 : 0) + s.chunks.size;
      return n;
    },

    async process(state, messages: InputMessage[], ctx: ProcessorContext): Promise<Effects> {
      const changed = settle(state);
      const outputs: Effects['outputs'] = [];
      const requests = messages.map((m) => eventsOfTypes([m], FLOW_TYPES, ctx, 'occupancy')).filter((events) => events.length > 0);
      if (requests.length === 0) return { outputs, changed };
      const known = await venues.resolve(requests.flatMap((events) => events.map((e) => e.venueId)));
      const reloaded = new Set<string>();
      const out = (u: OccupancyUpdate) => outputs.push({ topic: opts.outputTopic, key: u.venueId, value: encodeOccupancyUpdate(u) });
      const unreflected = new Map<string, number>();
      const report = (venueId: string, reason: UnreflectedReason) => {
        const k = `${venueId}|${reason}`;
        unreflected.set(k, (unreflected.get(k) ?? 0) + 1);
      };

      /** What a request changed in a scope since its last update. */
      interface Touch {
        capacity: number | null;
        reason: 'flow' | 'count';
        ts: number;
        counted: boolean;
      }
      const emit = (s: Scope, t: Touch) => {
        const { value, clamps } = figure(s);
        const clamped = Math.max(0, clamps - s.clampsAt);
        s.clampsAt = clamps;
        if (value === s.value && clamped === 0 && !t.counted) return;
        s.value = value;
        s.ts = Math.max(s.ts, t.ts);
        out(update(s, t.capacity, s.ts, t.reason, clamped));
      };

      for (const events of requests) {
        // A message is one ingest request: its events are applied together, one update per scope it changed.
        const touched = new Map<Scope, Touch>();
        for (const e of events) {
          const c = await changeOf(e, venues, known, reloaded);
          if (!c) continue;
          const key = scopeKey(c.scope.venueId, c.scope.zoneId);
          const tz = c.info.timezone;
          const hour = c.info.occupancy_reset_hour;
          let s = state.scopes.get(key);
          // "Now" is the day ingest received the event in: an event of a day that had already ended
          // then (a backfill, a connector hours behind across the reset) is that day's history, not
          // live. Decided from the event alone, so a replay decides the same.
          const current = s !== undefined && c.ts >= s.period && c.ts < endOf(s) && e.receivedAt < endOf(s);
          if (!current && e.receivedAt >= nextPeriodStart(periodStart(c.ts, hour, tz), hour, tz)) {
            report(c.scope.venueId, 'earlier_day');
            continue;
          }
          if (!s) {
            state.scopes.set(key, (s = newScope(key)));
            const p = periodStart(c.ts, hour, tz);
            Object.assign(s, { live: true, operatorId: c.scope.operatorId, timezone: tz, resetHour: hour, period: p, ts: p });
            changed.add(key);
          }
          if (s.timezone !== tz || s.resetHour !== hour || s.operatorId !== c.scope.operatorId) {
            // A new reset hour applies from the end of the current period (the next reset under it).
            Object.assign(s, { timezone: tz, resetHour: hour, operatorId: c.scope.operatorId, end: NaN });
            changed.add(key);
          }
          if (c.ts < s.period) {
            report(s.venueId, 'earlier_day');
            continue;
          }
          if (c.ts >= endOf(s)) {
            // A later period: the figure so far goes out, then the reset, then the new period's.
            const before = touched.get(s);
            if (before) emit(s, before);
            touched.delete(s);
            startPeriod(s, periodStart(c.ts, hour, tz), changed);
            out(update(s, c.capacity, s.period, 'reset', 0));
          }
          const { placed, chunk } = place(s, c.ts, c.absolute, c.amount, isDerivedId(e.id) ? e.id : null);
          if (placed === 'duplicate') {
            report(s.venueId, 'duplicate');
            continue;
          }
          if (placed === 'approximated') report(s.venueId, 'approximated');
          changed.add(key);
          changed.add(chunk.key);
          const t = touched.get(s);
          if (t) {
            t.capacity = c.capacity;
            t.reason = c.absolute ? 'count' : 'flow';
            t.ts = Math.max(t.ts, c.ts);
            t.counted ||= c.absolute;
          } else touched.set(s, { capacity: c.capacity, reason: c.absolute ? 'count' : 'flow', ts: c.ts, counted: c.absolute });
        }
        for (const [s, t] of touched) {
          emit(s, t);
          bound(s, maxFlows, changed);
        }
      }
      if (unreflected.size > 0) {
        ctx.log.debug({ partition: ctx.partition, unreflected: Object.fromEntries(unreflected) }, 'occupancy: events not (exactly) reflected in live occupancy');
        if (opts.unreflected) {
          for (const [k, n] of unreflected) {
            const bar = k.indexOf('|');
            opts.unreflected(k.slice(0, bar), k.slice(bar + 1) as UnreflectedReason, n);
          }
        }
      }
      return { outputs, changed };
    },

    /** The reset of scopes whose period ended with no event of the next one (only once caught up, so replays are deterministic). */
    async tick(state, ctx) {
      const changed = settle(state);
      const outputs: Effects['outputs'] = [];
      if (!ctx.caughtUp) return { outputs, changed };
      const due: Scope[] = [];
      for (const s of state.scopes.values()) if (s.live && ctx.now >= endOf(s)) due.push(s);
      if (due.length === 0) return { outputs, changed };
      const known = await venues.resolve(due.map((s) => s.venueId));
      for (const s of due) {
        startPeriod(s, periodStart(ctx.now, s.resetHour, s.timezone), changed);
        outputs.push({ topic: opts.outputTopic, key: s.venueId, value: encodeOccupancyUpdate(update(s, capacityOf(s, known), s.period, 'reset', 0)) });
      }
      return { outputs, changed };
    },
  };
}
