import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Queryable } from '../../postgres/client.js';
import { decodeStateEntry, encodeStateEntry, encodeVisit, type CanonicalEvent, type Visit } from '../../lib/events.js';
import { eventsOfTypes, type Effects, type Processor } from './runtime.js';
import { VenueInfos, type VenueInfo } from './venues.js';

/**
 * Visits per venue and per zone from `device_seen` / `device_left` (docs/processors.md#visits).
 *
 * A device's visit to a scope (the whole venue, or one zone) runs from its first to its last
 * sighting; it ends when the device is not seen for `VISIT_GAP_MS` (a sighting after that starts a
 * new visit), or at a `device_left`. Closed visits shorter than `MIN_DWELL_MS` (or of a single
 * sighting) are passers-by and are not emitted. Time is event time: a visit closes once the
 * partition's stream time (newest event time seen) is past its last sighting + gap + the reorder
 * window, or, once the processor has read all its input, when the wall clock is.
 */

export const VISIT_GAP_MS = 15 * 60_000;
export const MIN_DWELL_MS = 2 * 60_000;
/** Sightings this much older than the newest one seen still join their visit. */
export const VISIT_REORDER_MS = 2 * 60_000;

const openSchema = z.object({
  o: z.string(),
  v: z.string(),
  z: z.string().nullable(),
  d: z.string(),
  r: z.boolean(),
  first: z.number(),
  last: z.number(),
  n: z.number(),
});
type Open = z.infer<typeof openSchema>;
const streamSchema = z.object({ t: z.number() });

/*
 * An open visit's changelog entry. Its key names the venue, zone and device, so the value holds
 * only the rest, in OPEN_BYTES: a version byte (1), the operator id (16 bytes), randomized (1),
 * first and last sighting (float64 each), sightings (uint32). As JSON it took about 190 bytes, and
 * visits' entries are most of what the pipeline writes to Kafka. Entries written as JSON (which
 * starts with `{`) are still read.
 */
const OPEN_V1 = 1;
const OPEN_BYTES = 38;

function encodeOpen(o: Open): Buffer {
  const b = Buffer.allocUnsafe(OPEN_BYTES);
  b[0] = OPEN_V1;
  b.write(o.o.replaceAll('-', ''), 1, 16, 'hex');
  b[17] = o.r ? 1 : 0;
  b.writeDoubleLE(o.first, 18);
  b.writeDoubleLE(o.last, 26);
  b.writeUInt32LE(o.n, 34);
  return b;
}

function decodeOpen(key: string, b: Buffer): Open {
  if (b[0] !== OPEN_V1) return decodeStateEntry(openSchema, b)!;
  const [v, z, d] = key.split('|');
  if (b.length !== OPEN_BYTES || v === undefined || z === undefined || d === undefined) throw new Error(`visits: malformed state entry ${key}`);
  const h = b.toString('hex', 1, 17);
  return {
    o: `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`,
    v,
    z: z === '' ? null : z,
    d,
    r: b[17] === 1,
    first: b.readDoubleLE(18),
    last: b.readDoubleLE(26),
    n: b.readUInt32LE(34),
  };
}
const STREAM_KEY = '~stream';
const SIGHTINGS = new Set(['device_seen', 'device_left'] as const);

export interface VisitsState {
  open: Map<string, Open>;
  streamTime: number;
  /** Stream time of the last sweep for expired visits (memory only). */
  sweptAt: number;
}

const SWEEP_EVERY_MS = 60_000;

/** A stable id per (scope, device, start): a replayed or reprocessed visit keeps it. */
function visitId(o: Open): string {
  const h = createHash('sha256').update(`${o.v}|${o.z ?? ''}|${o.d}|${o.first}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

const qualifies = (o: Open) => o.n >= 2 && o.last - o.first >= MIN_DWELL_MS;
const expired = (o: Open, t: number) => t - VISIT_REORDER_MS > o.last + VISIT_GAP_MS;

export function createVisitsProcessor(opts: { db: Queryable; inputTopic: string; outputTopic: string; contextTtlMs?: number }): Processor<VisitsState> {
  const venues = new VenueInfos(opts.db, opts.contextTtlMs);

  const close = (state: VisitsState, key: string, effects: Effects) => {
    const o = state.open.get(key)!;
    state.open.delete(key);
    effects.changed.add(key);
    if (!qualifies(o)) return;
    const visit: Visit = { id: visitId(o), operatorId: o.o, venueId: o.v, zoneId: o.z, device: o.d, randomizedMac: o.r, startTs: o.first, endTs: o.last, sightings: o.n };
    effects.outputs.push({ topic: opts.outputTopic, key: o.v, value: encodeVisit(visit) });
  };

  const sighting = (state: VisitsState, e: CanonicalEvent, zoneId: string | null, effects: Effects) => {
    const key = `${e.venueId}|${zoneId ?? ''}|${e.device}`;
    let o = state.open.get(key);
    if (o && (expired(o, state.streamTime) || e.ts > o.last + VISIT_GAP_MS)) {
      close(state, key, effects);
      o = undefined;
    }
    if (!o) {
      // Too late to place (its visit may be closed already), or a departure without a visit.
      if (e.ts < state.streamTime - VISIT_REORDER_MS || e.type === 'device_left') return;
      state.open.set(key, { o: e.operatorId, v: e.venueId, z: zoneId, d: e.device!, r: e.randomizedMac, first: e.ts, last: e.ts, n: 1 });
      effects.changed.add(key);
      return;
    }
    if (e.ts < o.first - VISIT_GAP_MS) return; // an older visit's sighting, long closed
    o.first = Math.min(o.first, e.ts);
    o.last = Math.max(o.last, e.ts);
    o.n++;
    effects.changed.add(key);
    if (e.type === 'device_left') close(state, key, effects);
  };

  return {
    name: 'visits',
    // Closed visits are history (their sink writes every 2 s): fewer, larger transactions.
    commitIntervalMs: 2_000,
    inputs: [opts.inputTopic],
    createState: () => ({ open: new Map(), streamTime: 0, sweptAt: 0 }),
    restore(state, key, value) {
      if (key === STREAM_KEY) {
        state.streamTime = decodeStateEntry(streamSchema, value)?.t ?? 0;
        return;
      }
      if (value) state.open.set(key, decodeOpen(key, value));
      else state.open.delete(key);
    },
    entry(state, key) {
      if (key === STREAM_KEY) return encodeStateEntry({ t: state.streamTime });
      const o = state.open.get(key);
      return o ? encodeOpen(o) : null;
    },
    size: (state) => state.open.size,

    async process(state, messages, ctx) {
      const effects: Effects = { outputs: [], changed: new Set() };
      const events: CanonicalEvent[] = [];
      for (const e of eventsOfTypes(messages, SIGHTINGS, ctx, 'visits')) if (e.device) events.push(e);
      if (events.length === 0) return effects;
      const known = await venues.resolve(events.map((e) => e.venueId));
      const reloaded = new Set<string>();
      const before = state.streamTime;
      for (const e of events) {
        let info: VenueInfo | undefined = known.get(e.venueId);
        if (e.zoneId) info = await venues.withZone(e.venueId, e.zoneId, known, reloaded);
        if (!info || !info.is_active || info.operator_id !== e.operatorId) continue;
        state.streamTime = Math.max(state.streamTime, e.ts);
        sighting(state, e, null, effects);
        if (e.zoneId && info.zones.some((z) => z.id === e.zoneId)) sighting(state, e, e.zoneId, effects);
      }
      if (state.streamTime > before) {
        // A sweep scans every open visit, so it runs once per SWEEP_EVERY_MS of event time. When a
        // visit is emitted does not change what it holds: a device's next sighting closes its
        // expired visit first, swept or not.
        if (state.streamTime - state.sweptAt >= SWEEP_EVERY_MS) {
          state.sweptAt = state.streamTime;
          for (const [key, o] of state.open) {
            if (expired(o, state.streamTime)) close(state, key, effects);
          }
        }
        effects.changed.add(STREAM_KEY);
      }
      return effects;
    },

    /** Once caught up, the wall clock closes visits of devices no longer seen. */
    async tick(state, ctx) {
      const effects: Effects = { outputs: [], changed: new Set() };
      if (!ctx.caughtUp) return effects;
      for (const [key, o] of state.open) if (expired(o, ctx.now)) close(state, key, effects);
      return effects;
    },
  };
}
