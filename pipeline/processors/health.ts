import { z } from 'zod';
import type { Queryable } from '../../postgres/client.js';
import {
  decodeIngestReport,
  decodeStateEntry,
  encodeConnectorHealthChange,
  encodeStateEntry,
  type ConnectorHealth,
  type ConnectorType,
} from '../../lib/events.js';
import { describeError } from '../sink/dead-letter.js';
import type { Effects, Processor } from './runtime.js';
import { VenueInfos } from './venues.js';

/**
 * Connector health per active integration (docs/processors.md#connector-health), from the ingest
 * reports of its venue alone (one small message per request, so health never reads the events).
 * An integration's last sign of life is the newest time ingest accepted an event of its venue and
 * connector type (a heartbeat is one: ingest accepts it only naming an active integration of that
 * venue and type). Its rejection rate is rejected / submitted events of its venue and connector
 * type over the last 15 minutes.
 * Statuses are evaluated on the wall clock, by the timer, once the processor has read all its
 * input (a replay of old input must not flag live connectors offline). A change is emitted as a
 * transition; every integration also gets an hourly snapshot (so the dashboard finds a recent row
 * for stable ones).
 */

/** How often each connector type normally sends something (vendor facts, docs/processors.md). */
export const EXPECTED_INTERVAL_MS: Record<ConnectorType, number> = {
  meraki: 60_000,
  aruba: 60_000,
  unifi: 60_000,
  density: 300_000,
  verkada: 900_000,
  square: 900_000,
  mywifi: 900_000,
};
/** Silent for more than this many intervals: degraded; more than OFFLINE_AFTER: offline. */
export const DEGRADED_AFTER = 3;
export const OFFLINE_AFTER = 10;
export const REJECTION_WINDOW_MS = 15 * 60_000;
/** At least this share of submitted events rejected (with at least MIN_SUBMITTED submitted): degraded. */
export const DEGRADED_REJECTION_RATE = 0.05;
export const MIN_SUBMITTED = 20;
export const SNAPSHOT_EVERY_MS = 3_600_000;

const sourceSchema = z.object({
  o: z.string(),
  v: z.string(),
  t: z.string(),
  last: z.number().nullable(),
  /** Per minute: [minute start, accepted, rejected]. */
  minutes: z.array(z.tuple([z.number(), z.number(), z.number()])),
});
type Source = z.infer<typeof sourceSchema>;
const integrationSchema = z.object({
  o: z.string(),
  v: z.string(),
  t: z.string(),
  status: z.enum(['healthy', 'degraded', 'offline']).nullable(),
  snap: z.number(),
});
type Integration = z.infer<typeof integrationSchema>;

export interface HealthState {
  sources: Map<string, Source>;
  integrations: Map<string, Integration>;
}

/** The status of an integration from its last sign of life and its rejection counts. */
export function healthOf(type: ConnectorType, lastAt: number | null, accepted: number, rejected: number, now: number): { status: ConnectorHealth; rate: number; reason: string } {
  const interval = EXPECTED_INTERVAL_MS[type];
  const submitted = accepted + rejected;
  const rate = submitted === 0 ? 0 : rejected / submitted;
  if (lastAt === null) return { status: 'offline', rate, reason: 'nothing received yet' };
  const silent = now - lastAt;
  if (silent > OFFLINE_AFTER * interval) return { status: 'offline', rate, reason: `silent for ${Math.round(silent / 1000)} s` };
  if (silent > DEGRADED_AFTER * interval) return { status: 'degraded', rate, reason: `silent for ${Math.round(silent / 1000)} s` };
  if (submitted >= MIN_SUBMITTED && rate >= DEGRADED_REJECTION_RATE) return { status: 'degraded', rate, reason: `${Math.round(rate * 100)}% of events rejected` };
  return { status: 'healthy', rate, reason: 'ok' };
}

const sourceKey = (venueId: string, type: string) => `s|${venueId}|${type}`;

export function createHealthProcessor(opts: { db: Queryable; reportsTopic: string; outputTopic: string; contextTtlMs?: number }): Processor<HealthState> {
  const venues = new VenueInfos(opts.db, opts.contextTtlMs);

  const source = (state: HealthState, o: string, v: string, t: string, dirty: Set<string>): Source => {
    const key = sourceKey(v, t);
    let s = state.sources.get(key);
    if (!s) state.sources.set(key, (s = { o, v, t, last: null, minutes: [] }));
    dirty.add(key);
    return s;
  };

  return {
    name: 'health',
    // Health changes over minutes: fewer, larger transactions.
    commitIntervalMs: 2_000,
    inputs: [opts.reportsTopic],
    createState: () => ({ sources: new Map(), integrations: new Map() }),
    restore(state, key, value) {
      if (key.startsWith('s|')) {
        const s = decodeStateEntry(sourceSchema, value);
        if (s) state.sources.set(key, s);
        else state.sources.delete(key);
      } else {
        const i = decodeStateEntry(integrationSchema, value);
        if (i) state.integrations.set(key, i);
        else state.integrations.delete(key);
      }
    },
    entry(state, key) {
      const value = key.startsWith('s|') ? state.sources.get(key) : state.integrations.get(key);
      return value ? encodeStateEntry(value) : null;
    },
    size: (state) => state.sources.size + state.integrations.size,

    async process(state, messages, ctx) {
      const dirty = new Set<string>();
      for (const m of messages) {
        try {
          const r = decodeIngestReport(m.value);
          const s = source(state, r.operatorId, r.venueId, r.connectorType, dirty);
          // The report travels in the same send as the request's events: accepted ones are a sign of life.
          if (r.accepted > 0) s.last = Math.max(s.last ?? 0, r.ts);
          const minute = Math.floor(r.ts / 60_000) * 60_000;
          const at = s.minutes.find((x) => x[0] === minute);
          if (at) {
            at[1] += r.accepted;
            at[2] += r.rejected;
          } else s.minutes.push([minute, r.accepted, r.rejected]);
          s.minutes = s.minutes.filter((x) => x[0] > minute - REJECTION_WINDOW_MS).sort((a, b) => a[0] - b[0]);
        } catch (err) {
          ctx.log.warn({ topic: m.topic, partition: m.partition, offset: m.offset, err: describeError(err) }, 'health: undecodable report skipped');
        }
      }
      return { outputs: [], changed: dirty };
    },

    async tick(state, ctx) {
      const effects: Effects = { outputs: [], changed: new Set() };
      if (!ctx.caughtUp || (state.sources.size === 0 && state.integrations.size === 0)) return effects;
      const venueIds = new Set([...state.sources.values()].map((s) => s.v));
      for (const i of state.integrations.values()) venueIds.add(i.v);
      const known = await venues.resolve(venueIds, ctx.now);
      const active = new Set<string>();
      for (const venueId of venueIds) {
        const info = known.get(venueId);
        if (!info?.is_active) continue;
        for (const ig of info.integrations) {
          const key = `i|${ig.id}`;
          active.add(key);
          const i = state.integrations.get(key) ?? { o: info.operator_id, v: venueId, t: ig.connector_type, status: null, snap: 0 };
          state.integrations.set(key, i);
          const src = state.sources.get(sourceKey(venueId, ig.connector_type));
          const recent = (src?.minutes ?? []).filter((x) => x[0] > ctx.now - REJECTION_WINDOW_MS);
          const accepted = recent.reduce((n, x) => n + x[1], 0);
          const rejected = recent.reduce((n, x) => n + x[2], 0);
          const lastAt = src?.last ?? -1;
          const h = healthOf(ig.connector_type as ConnectorType, lastAt < 0 ? null : lastAt, accepted, rejected, ctx.now);
          const transition = h.status !== i.status;
          if (!transition && ctx.now - i.snap < SNAPSHOT_EVERY_MS) continue;
          effects.outputs.push({
            topic: opts.outputTopic,
            key: venueId,
            value: encodeConnectorHealthChange({
              operatorId: info.operator_id,
              venueId,
              integrationId: ig.id,
              connectorType: ig.connector_type as ConnectorType,
              status: h.status,
              previous: transition ? i.status : h.status,
              lastEventAt: lastAt < 0 ? null : lastAt,
              rejectionRate: Math.round(h.rate * 10_000) / 10_000,
              reason: h.reason,
              ts: ctx.now,
            }),
          });
          i.status = h.status;
          i.snap = ctx.now;
          effects.changed.add(key);
        }
      }
      // Integrations deleted or deactivated since: forgotten.
      for (const key of [...state.integrations.keys()]) {
        const i = state.integrations.get(key)!;
        if (!active.has(key) && known.has(i.v)) {
          state.integrations.delete(key);
          effects.changed.add(key);
        }
      }
      return effects;
    },
  };
}
