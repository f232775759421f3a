import { encodeOccupancyUpdate, type OccupancyUpdate } from '../../lib/events/derived.js';
import { type TopicEvent } from '../../lib/events/canonical.js';
import { nextPeriodStart, periodStart } from '../../domain/telemetry/calendar.js';
import { flowOf } from '../../domain/analytics/occupancy-rule.js';
import { eventsOfTypes, type Effects, type InputMessage, type Processor, type ProcessorContext } from './processor.js';
import type { VenueInfo, VenueLookup } from './venues.js';
import {
  bound,
  Chunk,
  CHUNK_MARK,
  CHUNK_MS,
  endOf,
  figure,
  flowBytes,
  MAX_AMOUNT,
  MAX_PERIOD_FLOWS,
  newScope,
  place,
  scopeKey,
  startPeriod,
  type OccupancyState,
  type Scope,
} from './occupancy/model.js';
import { decodeChunk, decodeHead, decodeOldScope, encodeChunk, encodeHead, isHead } from './occupancy/codec.js';

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

export { CHUNK_MS, MAX_PERIOD_FLOWS, type OccupancyState };

const FLOW_TYPES = new Set(['entry', 'exit', 'occupancy'] as const);

/** Why an event is not, or not exactly, reflected in live occupancy. */
export type UnreflectedReason = 'earlier_day' | 'duplicate' | 'approximated';

interface Change {
  scope: { venueId: string; zoneId: string | null; operatorId: string };
  capacity: number | null;
  info: VenueInfo;
  ts: number;
  absolute: boolean;
  amount: number;
}

/** The change an event makes to occupancy, or undefined when it makes none. */
async function changeOf(
  e: TopicEvent,
  venues: VenueLookup,
  known: Map<string, VenueInfo>,
  reloaded: Set<string>,
): Promise<Change | undefined> {
  if (e.type !== 'entry' && e.type !== 'exit' && e.type !== 'occupancy') return undefined;
  const flow = flowOf(e.type, e.metrics);
  if (!flow) return undefined;
  const absolute = flow.absolute;
  const amount = Math.max(-MAX_AMOUNT, Math.min(MAX_AMOUNT, flow.amount)) || 0;
  let info = known.get(e.venueId);
  // A zone the cached venue does not list reloads it, once per batch (a zone created a moment ago).
  if (e.zoneId && info && !info.zones.some((z) => z.id === e.zoneId) && !reloaded.has(e.venueId)) {
    reloaded.add(e.venueId);
    info = await venues.refresh(e.venueId);
    if (info) known.set(e.venueId, info);
  }
  if (!info || !info.is_active || info.operator_id !== e.operatorId) return undefined;
  if (!e.zoneId)
    return { scope: { venueId: e.venueId, zoneId: null, operatorId: e.operatorId }, capacity: null, info, ts: e.ts, absolute, amount };
  const zone = info.zones.find((z) => z.id === e.zoneId);
  if (!zone) return undefined; // deleted since ingest: its events no longer count anywhere
  if (zone.type === 'entrance' || zone.type === 'exit') {
    return { scope: { venueId: e.venueId, zoneId: null, operatorId: e.operatorId }, capacity: null, info, ts: e.ts, absolute, amount };
  }
  return {
    scope: { venueId: e.venueId, zoneId: zone.id, operatorId: e.operatorId },
    capacity: zone.capacity,
    info,
    ts: e.ts,
    absolute,
    amount,
  };
}

/** Random (version 4) event ids never come again; other ids are derived from a connector's event id or an Idempotency-Key and repeat on a re-delivery. */
const isDerivedId = (id: string) => id[14] !== '4';

export interface OccupancyProcessorOptions {
  /** Time zone, reset hour, zones and capacities of the events' venues. */
  venues: VenueLookup;
  inputTopic: string;
  outputTopic: string;
  /** Called (after each batch, per venue and reason) with the events not, or not exactly, reflected in live occupancy. */
  unreflected?: (venueId: string, reason: UnreflectedReason, count: number) => void;
  /** Flows held per scope (default MAX_PERIOD_FLOWS). */
  maxPeriodFlows?: number;
}

export function createOccupancyProcessor(opts: OccupancyProcessorOptions): Processor<OccupancyState> {
  const { venues } = opts;
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
      if (isHead(value)) {
        const head = decodeHead(value);
        if (!head) {
          s.live = false;
          state.pending.add(key);
          return;
        }
        Object.assign(s, { live: true, ...head });
        return;
      }
      // The layout before chunks: the scope goes on in its period from its last figure, taken as a
      // count at that figure's time (later flows move it; earlier late ones are covered by it).
      const old = decodeOldScope(value);
      if (!old) {
        s.live = false;
        state.pending.add(key);
        return;
      }
      Object.assign(s, {
        live: true,
        operatorId: old.operatorId,
        timezone: old.timezone,
        resetHour: old.resetHour,
        period: old.period,
        value: old.value,
        ts: old.ts,
        clampsAt: 0,
      });
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
        ctx.log.debug(
          { partition: ctx.partition, unreflected: Object.fromEntries(unreflected) },
          'occupancy: events not (exactly) reflected in live occupancy',
        );
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
        outputs.push({
          topic: opts.outputTopic,
          key: s.venueId,
          value: encodeOccupancyUpdate(update(s, capacityOf(s, known), s.period, 'reset', 0)),
        });
      }
      return { outputs, changed };
    },
  };
}
