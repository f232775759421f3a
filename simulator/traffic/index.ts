import type { ConnectorType } from '../../lib/events/vocabulary.js';
import type { TrafficState } from '../model.js';
import { unitHash } from '../random.js';
import { localParts } from '../time.js';
import type { SimVenue } from '../venues.js';
import { aruba } from './aruba.js';
import { density } from './density.js';
import { meraki } from './meraki.js';
import { mywifi } from './mywifi.js';
import { square } from './square.js';
import { event, grid, type GeneratedEvent, type Generator, type Window } from './types.js';
import { unifi } from './unifi.js';
import { verkada } from './verkada.js';
// Live heartbeats come as often as connector health expects from each vendor.
import { EXPECTED_INTERVAL_MS } from '../../pipeline/processors/health.js';

export type { GeneratedEvent, IngestEvent, Window, Generator } from './types.js';

export const GENERATORS: Record<ConnectorType, Generator> = { meraki, aruba, unifi, mywifi, square, density, verkada };

/** History needs no minute-by-minute heartbeats: one every 15 minutes keeps the backfill small. */
export const BACKFILL_HEARTBEAT_MS = 900_000;

export const DEFAULT_MALFORMED_RATE = 0.01;

/**
 * Everything one connector of one venue sends in a window, in time order: its traffic, its
 * heartbeats (naming the integration), minus what a silence fault swallows, plus malformed twins
 * when faults are on. Pure: the same window, venue and state options give the same events.
 */
export function generate(connector: ConnectorType, w: Window, venue: SimVenue, state: TrafficState): GeneratedEvent[] {
  const events = GENERATORS[connector](w, venue, state);
  for (const ts of heartbeatTimes(connector, w, state)) {
    const integration = venue.integrations[connector];
    events.push(
      event(ts, 'heartbeat', { status: 'ok', version: 'simulator-1.0', ...(integration ? { integration_id: integration } : {}) }),
    );
  }
  events.sort((a, b) => a.ts - b.ts);
  const kept = state.options.faults ? events.filter((e) => !state.silent(venue, connector, e.ts)) : events;
  return state.options.faults ? withMalformed(kept, connector, venue, state) : kept;
}

function heartbeatTimes(connector: ConnectorType, w: Window, state: TrafficState): number[] {
  const live = state.options.liveFrom;
  const before = live === undefined ? w.to : Math.min(w.to, live);
  const out = grid({ from: w.from, to: before }, BACKFILL_HEARTBEAT_MS);
  if (live !== undefined && w.to > live) out.push(...grid({ from: Math.max(w.from, live), to: w.to }, EXPECTED_INTERVAL_MS[connector]));
  return out;
}

/** After about `malformedRate` of the events, a broken copy the API must reject (one of three faults). */
function withMalformed(events: GeneratedEvent[], connector: ConnectorType, venue: SimVenue, state: TrafficState): GeneratedEvent[] {
  const rate = state.options.malformedRate ?? DEFAULT_MALFORMED_RATE;
  const out: GeneratedEvent[] = [];
  for (const e of events) {
    out.push(e);
    if (e.event.type === 'heartbeat') continue;
    const label = `${e.ts}|${e.event.type}|${JSON.stringify(e.event.payload)}`;
    if (unitHash(state.seed, venue.key, connector, 'malformed', label) >= rate) continue;
    const kind = Math.floor(unitHash(state.seed, venue.key, connector, 'kind', label) * 3);
    const broken = structuredClone(e.event);
    // Its own vendor id, so the rejection names the fault rather than a duplicate.
    if (typeof broken.payload.event_id === 'string') broken.payload.event_id = `${broken.payload.event_id}-malformed`;
    if (kind === 0) {
      // A local wall-clock time without a zone: which instant it means would be a guess.
      const p = localParts(e.ts, venue.timezone);
      const two = (n: number) => String(n).padStart(2, '0');
      broken.timestamp = `${p.year}-${two(p.month)}-${two(p.day)} ${two(p.hour)}:${two(p.minute)}:${two(p.second)}`;
    } else if (kind === 1) {
      broken.type = 'visit';
    } else {
      broken.payload = { ...broken.payload, zone: 'decommissioned-zone' };
      delete broken.payload.zone_id;
    }
    out.push({ ts: e.ts, event: broken, malformed: true });
  }
  return out;
}
