import { z } from 'zod';
import type { Queryable } from '../../postgres/client.js';
import { decodeStateEntry, encodeOccupancyUpdate, encodeStateEntry, type CanonicalEvent, type OccupancyUpdate } from '../../lib/events.js';
import { nextPeriodStart, periodStart } from '../../domain/telemetry/calendar.js';
import { eventsOfTypes, type Effects, type InputMessage, type Processor, type ProcessorContext } from './runtime.js';
import { VenueInfos, type VenueInfo } from './venues.js';

/**
 * Live occupancy per venue and per area/counter zone (docs/processors.md#occupancy).
 *
 * - The venue's count takes events with no zone or at an `entrance`/`exit` zone; an `area` or
 *   `counter` zone's count takes events at that zone only.
 * - `entry`/`exit` move the count by their `entries`/`exits` metric (clamped at 0, the clamp
 *   recorded); an event carrying an `occupancy` metric (a connector's count: Density's count after
 *   a crossing, an `occupancy` event) sets it (re-baseline).
 * - Each day at the venue's `occupancy_reset_hour` (local time, DST-correct) the count restarts at 0.
 * - Events up to `REORDER_WINDOW_MS` older than the newest one seen are put in event-time order
 *   and the count recomputed from the state at the window's start, so a late exit cannot clamp
 *   what an earlier entry would have covered. Older events still count (a flow moves the count, a
 *   count from before the window is ignored as stale; an event of an earlier reset period is
 *   ignored since that day is closed).
 * - The events of one message (one ingest request) are applied together: one update per scope
 *   they changed, with the figure after them and the clamps they caused (a reset in between is
 *   emitted between the figure before it and the one after).
 */

export const REORDER_WINDOW_MS = 120_000;
/** The window also holds at most this many events per scope, so a burst keeps each event's cost bounded. */
export const MAX_WINDOW_EVENTS = 2_000;
const FLOW_TYPES = new Set(['entry', 'exit', 'occupancy'] as const);

/** One event of the window: time, input order, absolute (1) or flow (0), amount. */
const pendingSchema = z.tuple([z.number(), z.number(), z.union([z.literal(0), z.literal(1)]), z.number()]);
type Pending = z.infer<typeof pendingSchema>;

const scopeSchema = z.object({
  operatorId: z.string(),
  venueId: z.string(),
  zoneId: z.string().nullable(),
  timezone: z.string(),
  resetHour: z.number(),
  /** The count before the window, as of `baseTs`, in the reset period starting `basePeriod`. */
  base: z.number(),
  baseTs: z.number(),
  basePeriod: z.number(),
  baseClamped: z.number(),
  pending: z.array(pendingSchema),
  /** The figure last emitted, its time and reset period, and the clamp total behind it. */
  value: z.number(),
  ts: z.number(),
  period: z.number(),
  clamped: z.number(),
  maxTs: z.number(),
  seq: z.number(),
});
type Scope = z.infer<typeof scopeSchema>;

export type OccupancyState = Map<string, Scope>;

const scopeKey = (venueId: string, zoneId: string | null) => `${venueId}|${zoneId ?? ''}`;

interface Change {
  scope: { venueId: string; zoneId: string | null; operatorId: string };
  capacity: number | null;
  info: VenueInfo;
  ts: number;
  absolute: boolean;
  amount: number;
}

/** The change an event makes to occupancy, or undefined when it makes none. */
async function changeOf(e: CanonicalEvent, venues: VenueInfos, known: Map<string, VenueInfo>, reloaded: Set<string>): Promise<Change | undefined> {
  if (e.type !== 'entry' && e.type !== 'exit' && e.type !== 'occupancy') return undefined;
  const m = e.metrics;
  let absolute = false;
  let amount: number;
  if (m.occupancy !== undefined) {
    absolute = true;
    amount = Math.max(0, Math.round(m.occupancy));
  } else if (e.type === 'entry') amount = Math.round(m.entries ?? 1);
  else if (e.type === 'exit') amount = -Math.round(m.exits ?? 1);
  else return undefined;
  const info = e.zoneId ? await venues.withZone(e.venueId, e.zoneId, known, reloaded) : known.get(e.venueId);
  if (!info || !info.is_active || info.operator_id !== e.operatorId) return undefined;
  if (!e.zoneId) return { scope: { venueId: e.venueId, zoneId: null, operatorId: e.operatorId }, capacity: null, info, ts: e.ts, absolute, amount };
  const zone = info.zones.find((z) => z.id === e.zoneId);
  if (!zone) return undefined; // deleted since ingest: its events no longer count anywhere
  if (zone.type === 'entrance' || zone.type === 'exit') {
    return { scope: { venueId: e.venueId, zoneId: null, operatorId: e.operatorId }, capacity: null, info, ts: e.ts, absolute, amount };
  }
  return { scope: { venueId: e.venueId, zoneId: zone.id, operatorId: e.operatorId }, capacity: zone.capacity, info, ts: e.ts, absolute, amount };
}

/** The count after the window's events, replayed in event-time order from the base. */
interface Replayed {
  value: number;
  period: number;
  clamped: number;
}

/**
 * The reset period of an instant: the scope's last period when the instant falls in it (the
 * common case, two comparisons), else looked up in a memo per UTC quarter hour (a reset falls on
 * a local full hour, which is a UTC quarter hour in every time zone).
 */
const periods = new Map<string, number>();
const lastPeriod = new WeakMap<Scope, { start: number; end: number; hour: number; timezone: string }>();
function periodOf(ts: number, s: Scope): number {
  const last = lastPeriod.get(s);
  if (last && ts >= last.start && ts < last.end && last.hour === s.resetHour && last.timezone === s.timezone) return last.start;
  const quarter = Math.floor(ts / 900_000);
  const key = `${s.timezone}|${s.resetHour}|${quarter}`;
  let p = periods.get(key);
  if (p === undefined) {
    if (periods.size > 100_000) periods.clear();
    periods.set(key, (p = periodStart(quarter * 900_000, s.resetHour, s.timezone)));
  }
  lastPeriod.set(s, { start: p, end: nextPeriodStart(p, s.resetHour, s.timezone), hour: s.resetHour, timezone: s.timezone });
  return p;
}

/**
 * The figure after each event of the window, kept per scope object (not persisted: a restored
 * scope replays once), as three columns of numbers: a replay step allocates nothing. An event
 * inserted at `from` replays only the events from there on, so an event a little out of order
 * costs a few steps, not the window.
 */
interface Prefix {
  value: number[];
  period: number[];
  clamped: number[];
}
const prefixes = new WeakMap<Scope, Prefix>();
function replayFrom(s: Scope, from: number): Replayed {
  let after = prefixes.get(s);
  if (!after || after.value.length < from) {
    after = { value: [], period: [], clamped: [] };
    prefixes.set(s, after);
    from = 0;
  }
  after.value.length = from;
  after.period.length = from;
  after.clamped.length = from;
  let value = from > 0 ? after.value[from - 1]! : s.base;
  let period = from > 0 ? after.period[from - 1]! : s.basePeriod;
  let clamped = from > 0 ? after.clamped[from - 1]! : s.baseClamped;
  for (let i = from; i < s.pending.length; i++) {
    const [ts, , absolute, amount] = s.pending[i]!;
    const p = periodOf(ts, s);
    if (p > period) {
      period = p;
      value = 0;
    }
    if (absolute) value = amount;
    else {
      value += amount;
      if (value < 0) {
        clamped += -value;
        value = 0;
      }
    }
    after.value.push(value);
    after.period.push(period);
    after.clamped.push(clamped);
  }
  return { value, period, clamped };
}

/**
 * Moves the window's events older than `until`, and any beyond `MAX_WINDOW_EVENTS`, into the base.
 * Call after `replayFrom`: the base becomes the figure after the last event folded.
 */
function fold(s: Scope, until: number): void {
  let n = Math.max(0, s.pending.length - MAX_WINDOW_EVENTS);
  while (n < s.pending.length && s.pending[n]![0] < until) n++;
  if (n === 0) return;
  const after = prefixes.get(s)!;
  s.base = after.value[n - 1]!;
  s.basePeriod = after.period[n - 1]!;
  s.baseClamped = after.clamped[n - 1]!;
  s.baseTs = s.pending[n - 1]![0];
  // shift() trims an array's start in place; splice(0, n) moved the whole window, per event.
  for (let i = 0; i < n; i++) {
    s.pending.shift();
    after.value.shift();
    after.period.shift();
    after.clamped.shift();
  }
}

export function createOccupancyProcessor(opts: { db: Queryable; inputTopic: string; outputTopic: string; contextTtlMs?: number }): Processor<OccupancyState> {
  const venues = new VenueInfos(opts.db, opts.contextTtlMs);

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

  return {
    name: 'occupancy',
    // Live figures (/ws, alarms): held at most half a second, where most partitions see a batch or two.
    commitIntervalMs: 500,
    inputs: [opts.inputTopic],
    createState: () => new Map(),
    restore(state, key, value) {
      const s = decodeStateEntry(scopeSchema, value);
      if (s) state.set(key, s);
      else state.delete(key);
    },
    entry(state, key) {
      const s = state.get(key);
      return s ? encodeStateEntry(s) : null;
    },
    size: (state) => state.size,

    async process(state, messages: InputMessage[], ctx: ProcessorContext): Promise<Effects> {
      const requests = messages.map((m) => eventsOfTypes([m], FLOW_TYPES, ctx, 'occupancy')).filter((events) => events.length > 0);
      const outputs: Effects['outputs'] = [];
      const dirty = new Set<string>();
      if (requests.length === 0) return { outputs, changed: dirty };
      const known = await venues.resolve(requests.flatMap((events) => events.map((e) => e.venueId)));
      const reloaded = new Set<string>();
      const out = (u: OccupancyUpdate) => outputs.push({ topic: opts.outputTopic, key: u.venueId, value: encodeOccupancyUpdate(u) });
      for (const events of requests) {
        // A message is one ingest request: its events are applied together, one update per scope it changed.
        const changed = new Map<Scope, { capacity: number | null; reason: 'flow' | 'count'; clamped: number }>();
        for (const e of events) {
          const c = await changeOf(e, venues, known, reloaded);
          if (!c) continue;
          const key = scopeKey(c.scope.venueId, c.scope.zoneId);
          const tz = c.info.timezone;
          const hour = c.info.occupancy_reset_hour;
          let s = state.get(key);
          if (!s) {
            const p = periodStart(c.ts, hour, tz);
            s = { ...c.scope, timezone: tz, resetHour: hour, base: 0, baseTs: c.ts, basePeriod: p, baseClamped: 0, pending: [], value: 0, ts: c.ts, period: p, clamped: 0, maxTs: c.ts, seq: 0 };
            state.set(key, s);
          }
          s.timezone = tz;
          s.resetHour = hour;
          const p = periodOf(c.ts, s);
          dirty.add(key);
          if (p < s.basePeriod || (c.ts < s.baseTs && c.absolute)) {
            ctx.log.debug({ venueId: s.venueId, zoneId: s.zoneId, ts: c.ts }, 'occupancy: stale event ignored (closed day, or a count older than the window)');
            continue;
          }
          let from = 0;
          if (c.ts < s.baseTs) {
            // Later than the window: the flow still counts, as of now.
            s.base = Math.max(0, s.base + c.amount);
          } else {
            const entry: Pending = [c.ts, s.seq++, c.absolute ? 1 : 0, c.amount];
            from = s.pending.length;
            while (from > 0 && s.pending[from - 1]![0] > c.ts) from--;
            s.pending.splice(from, 0, entry);
          }
          s.maxTs = Math.max(s.maxTs, c.ts);
          const r = replayFrom(s, from);
          fold(s, s.maxTs - REORDER_WINDOW_MS);
          if (r.period > s.period) {
            // The figure before the reset goes out first, then the reset.
            const before = changed.get(s);
            if (before) out(update(s, before.capacity, s.ts, before.reason, before.clamped));
            changed.delete(s);
            s.value = 0;
            s.period = r.period;
            out(update(s, c.capacity, r.period, 'reset', 0));
            s.ts = r.period;
          }
          const clamped = Math.max(0, r.clamped - s.clamped);
          const moved = r.value !== s.value || clamped > 0 || c.absolute;
          s.clamped = r.clamped;
          s.value = r.value;
          if (moved) {
            s.ts = Math.max(s.ts, c.ts);
            const acc = changed.get(s);
            changed.set(s, { capacity: c.capacity, reason: c.absolute ? 'count' : 'flow', clamped: (acc?.clamped ?? 0) + clamped });
          }
        }
        for (const [s, u] of changed) out(update(s, u.capacity, s.ts, u.reason, u.clamped));
      }
      return { outputs, changed: dirty };
    },

    /** The daily reset of scopes no event reached since the reset time (only once caught up, so replays are deterministic). */
    async tick(state, ctx) {
      const outputs: Effects['outputs'] = [];
      const changed = new Set<string>();
      if (!ctx.caughtUp) return { outputs, changed };
      const due = [...state.values()].filter((s) => ctx.now - REORDER_WINDOW_MS >= nextPeriodStart(s.period, s.resetHour, s.timezone));
      if (due.length === 0) return { outputs, changed };
      const known = await venues.resolve(due.map((s) => s.venueId));
      for (const s of due) {
        const p = periodStart(ctx.now - REORDER_WINDOW_MS, s.resetHour, s.timezone);
        Object.assign(s, { base: 0, baseTs: p, basePeriod: p, baseClamped: 0, pending: [], value: 0, ts: p, period: p, clamped: 0, maxTs: Math.max(s.maxTs, p) });
        prefixes.delete(s);
        outputs.push({ topic: opts.outputTopic, key: s.venueId, value: encodeOccupancyUpdate(update(s, capacityOf(s, known), p, 'reset', 0)) });
        changed.add(scopeKey(s.venueId, s.zoneId));
      }
      return { outputs, changed };
    },
  };
}
