import { z } from 'zod';
import {
  CONNECTOR_HEALTH,
  decodeIngestReport,
  encodeConnectorHealthChange,
  type ConnectorHealth,
  type SourceOutcome,
} from '../../lib/events/derived.js';
import { decodeStateEntry, encodeStateEntry } from '../../lib/events/wire.js';
import { type ConnectorType } from '../../lib/events/vocabulary.js';
import type { Effects, Processor } from './processor.js';
import type { VenueLookup } from './venues.js';
import { DEGRADED_AFTER, EXPECTED_INTERVAL_MS, OFFLINE_AFTER } from '../../domain/analytics/connector-intervals.js';

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

export { DEGRADED_AFTER, EXPECTED_INTERVAL_MS, OFFLINE_AFTER };
export const REJECTION_WINDOW_MS = 15 * 60_000;
/** At least this share of submitted events rejected (with at least MIN_SUBMITTED submitted): degraded. */
export const DEGRADED_REJECTION_RATE = 0.05;
export const MIN_SUBMITTED = 20;
export const SNAPSHOT_EVERY_MS = 3_600_000;
/** A vendor link whose last this many deliveries or polls in a row failed: degraded, with the vendor's error. */
export const LINK_FAILURES = 3;

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
  status: z.enum(CONNECTOR_HEALTH).nullable(),
  snap: z.number(),
});
type Integration = z.infer<typeof integrationSchema>;
/** One integration's own vendor link (a webhook receiver or a poller): how its deliveries or polls went. */
const linkSchema = z.object({
  link: z.enum(['webhook', 'poll']),
  okAt: z.number().nullable(),
  errorAt: z.number().nullable(),
  error: z.string().nullable(),
  /** Failures since the last success. */
  failures: z.number(),
  /** Per minute: [minute start, taken, failed]. */
  minutes: z.array(z.tuple([z.number(), z.number(), z.number()])),
});
export type Link = z.infer<typeof linkSchema>;

export interface HealthState {
  sources: Map<string, Source>;
  integrations: Map<string, Integration>;
  /** Keyed `l|<integration id>`. */
  links: Map<string, Link>;
}

/** A vendor link's recent record, as healthOf reads it. */
export interface LinkRecord {
  link: Link['link'];
  okAt: number | null;
  error: string | null;
  failures: number;
  /** Deliveries or polls over the health window. */
  taken: number;
  failed: number;
}

const LINK_WORDS = {
  webhook: { what: 'webhook deliveries', failing: 'webhook deliveries refused' },
  poll: { what: 'polls', failing: 'polls failing' },
};

/**
 * The status of an integration from its last sign of life, its rejection counts and, when the
 * service runs its vendor link, how that link's deliveries or polls went. A link that works counts
 * as a sign of life even when it brought no events (a quiet site); a failing one names the
 * vendor's error, so a wrong secret or password shows before the silence does.
 */
export function healthOf(
  type: ConnectorType,
  lastAt: number | null,
  accepted: number,
  rejected: number,
  now: number,
  link?: LinkRecord,
  /** When the integration was created: one never heard from is `waiting`, not offline, for the first OFFLINE_AFTER intervals. */
  createdAt?: number,
): { status: ConnectorHealth; rate: number; reason: string } {
  const interval = EXPECTED_INTERVAL_MS[type];
  const submitted = accepted + rejected;
  const rate = submitted === 0 ? 0 : rejected / submitted;
  const alive = Math.max(lastAt ?? -1, link?.okAt ?? -1);
  const words = link ? LINK_WORDS[link.link] : undefined;
  const lastError = link?.error && link.failures > 0 ? `; last ${link.link === 'poll' ? 'poll' : 'delivery'} error: ${link.error}` : '';
  const cut = (reason: string) => (reason.length > 200 ? `${reason.slice(0, 199)}…` : reason);
  const failing =
    link && words && link.failures >= LINK_FAILURES
      ? cut(`${words.failing} (${link.failures} in a row): ${link.error ?? 'no reason given'}`)
      : undefined;
  if (alive < 0) {
    // A new integration with a wrong password or secret shows it at once, grace or not.
    if (failing) return { status: 'degraded', rate, reason: failing };
    if (createdAt !== undefined && now - createdAt <= OFFLINE_AFTER * interval) {
      return {
        status: 'waiting',
        rate,
        reason: cut(`waiting for its first data (created ${Math.round((now - createdAt) / 1000)} s ago)${lastError}`),
      };
    }
    return { status: 'offline', rate, reason: cut(`nothing received yet${lastError}`) };
  }
  const silent = now - alive;
  if (silent > OFFLINE_AFTER * interval)
    return { status: 'offline', rate, reason: cut(`silent for ${Math.round(silent / 1000)} s${lastError}`) };
  if (failing) return { status: 'degraded', rate, reason: failing };
  if (silent > DEGRADED_AFTER * interval)
    return { status: 'degraded', rate, reason: cut(`silent for ${Math.round(silent / 1000)} s${lastError}`) };
  if (link && words && link.taken + link.failed >= MIN_SUBMITTED && link.failed / (link.taken + link.failed) >= DEGRADED_REJECTION_RATE) {
    const share = Math.round((link.failed / (link.taken + link.failed)) * 100);
    return { status: 'degraded', rate, reason: cut(`${share}% of ${words.what} failed${lastError}`) };
  }
  if (submitted >= MIN_SUBMITTED && rate >= DEGRADED_REJECTION_RATE)
    return { status: 'degraded', rate, reason: `${Math.round(rate * 100)}% of events rejected` };
  return { status: 'healthy', rate, reason: 'ok' };
}

const sourceKey = (venueId: string, type: string) => `s|${venueId}|${type}`;

export interface HealthProcessorOptions {
  /** The active integrations of the reports' venues. */
  venues: VenueLookup;
  reportsTopic: string;
  outputTopic: string;
}

export function createHealthProcessor(opts: HealthProcessorOptions): Processor<HealthState> {
  const { venues } = opts;

  const source = (state: HealthState, o: string, v: string, t: string, dirty: Set<string>): Source => {
    const key = sourceKey(v, t);
    let s = state.sources.get(key);
    if (!s) state.sources.set(key, (s = { o, v, t, last: null, minutes: [] }));
    dirty.add(key);
    return s;
  };

  return {
    name: 'health',
    // Health changes over minutes, but its readers (and the sink's history) keep within 2 s of the head: a second's transactions.
    commitIntervalMs: 1_000,
    inputs: [opts.reportsTopic],
    createState: () => ({ sources: new Map(), integrations: new Map(), links: new Map() }),
    restore(state, key, value) {
      if (key.startsWith('l|')) {
        const l = decodeStateEntry(linkSchema, value);
        if (l) state.links.set(key, l);
        else state.links.delete(key);
      } else if (key.startsWith('s|')) {
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
      const value = key.startsWith('l|')
        ? state.links.get(key)
        : key.startsWith('s|')
          ? state.sources.get(key)
          : state.integrations.get(key);
      return value ? encodeStateEntry(value) : null;
    },
    size: (state) => state.sources.size + state.integrations.size + state.links.size,

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
          if (r.source) noteLink(state, r.source, r.ts, minute, dirty);
        } catch (err) {
          ctx.log.warn({ topic: m.topic, partition: m.partition, offset: m.offset, err }, 'health: undecodable report skipped');
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
          const h = healthOf(
            ig.connector_type as ConnectorType,
            lastAt < 0 ? null : lastAt,
            accepted,
            rejected,
            ctx.now,
            linkRecord(state.links.get(`l|${ig.id}`), ctx.now),
            Date.parse(ig.created_at),
          );
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
      // Integrations deleted or deactivated since: forgotten, with their link's record.
      for (const key of [...state.integrations.keys()]) {
        const i = state.integrations.get(key)!;
        if (!active.has(key) && known.has(i.v)) {
          state.integrations.delete(key);
          effects.changed.add(key);
          const linkKey = `l|${key.slice(2)}`;
          if (state.links.delete(linkKey)) effects.changed.add(linkKey);
        }
      }
      return effects;
    },
  };
}

/** Records one delivery's or poll's outcome on its integration's link. */
function noteLink(state: HealthState, source: SourceOutcome, ts: number, minute: number, dirty: Set<string>): void {
  const key = `l|${source.integrationId}`;
  let l = state.links.get(key);
  if (!l) state.links.set(key, (l = { link: source.link, okAt: null, errorAt: null, error: null, failures: 0, minutes: [] }));
  l.link = source.link;
  if (source.ok) {
    l.okAt = Math.max(l.okAt ?? 0, ts);
    l.failures = 0;
  } else {
    l.errorAt = Math.max(l.errorAt ?? 0, ts);
    l.error = source.error ?? null;
    l.failures++;
  }
  const at = l.minutes.find((x) => x[0] === minute);
  if (at) at[source.ok ? 1 : 2]++;
  else l.minutes.push([minute, source.ok ? 1 : 0, source.ok ? 0 : 1]);
  l.minutes = l.minutes.filter((x) => x[0] > minute - REJECTION_WINDOW_MS).sort((a, b) => a[0] - b[0]);
  dirty.add(key);
}

function linkRecord(l: Link | undefined, now: number): LinkRecord | undefined {
  if (!l) return undefined;
  const recent = l.minutes.filter((x) => x[0] > now - REJECTION_WINDOW_MS);
  return {
    link: l.link,
    okAt: l.okAt,
    error: l.error,
    failures: l.failures,
    taken: recent.reduce((n, x) => n + x[1], 0),
    failed: recent.reduce((n, x) => n + x[2], 0),
  };
}
