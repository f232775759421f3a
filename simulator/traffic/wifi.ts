import { Random } from '../random.js';
import { MINUTE } from '../time.js';
import type { Device, DayPlan, TrafficState } from '../model.js';
import type { SimVenue } from '../venues.js';
import { inWindow, overlaps, plansIn, type Window } from './types.js';

/** A Wi-Fi sighting, vendor-neutral; each connector writes it in its own fields. */
export interface Sighting {
  ts: number;
  device: Device;
  zone: string | null;
  /** 0 (barely heard) to 1 (next to the AP): each vendor maps it to its RSSI scale. */
  strength: number;
  associated: boolean;
  first: boolean;
  /** The visit's end (for UniFi's last_seen / disconnect). */
  leave: number;
  arrive: number;
  /** Stable per visit or passer-by, for AP and location choices. */
  key: string;
}

/**
 * Sightings in the window: every visitor with a phone is seen every 5 to 11 minutes from arrival
 * to departure (so a visit is a session with realistic dwell); passers-by, outside, are seen once
 * or twice, faintly. `associatedOnly` keeps what a controller that sees only associated clients
 * (UniFi) can report.
 */
export function sightingsIn(
  w: Window,
  venue: SimVenue,
  state: TrafficState,
  opts: { passers: boolean; associatedOnly: boolean },
): Sighting[] {
  const out: Sighting[] = [];
  for (const plan of plansIn(w, venue, state)) {
    plan.visits.forEach((v, i) => {
      if (!v.device || (opts.associatedOnly && !v.associated) || !overlaps(w, v.arrive, v.leave)) return;
      for (const s of visitSightings(state, venue, plan, i)) if (inWindow(w, s.ts)) out.push(s);
    });
    if (!opts.passers) continue;
    plan.passers.forEach((p, i) => {
      if (!overlaps(w, p.at, p.at + 5 * MINUTE)) return;
      const rng = Random.for(state.seed, venue.key, plan.date, 'passer', i);
      const strength = rng.between(0.05, 0.3);
      for (let k = 0; k < p.sightings; k++) {
        const ts = p.at + k * rng.between(30, 100) * 1000;
        if (inWindow(w, ts)) {
          out.push({
            ts,
            device: p.device,
            zone: null,
            strength,
            associated: false,
            first: k === 0,
            arrive: p.at,
            leave: p.at + 2 * MINUTE,
            key: `${plan.date}/p${i}`,
          });
        }
      }
    });
  }
  return out.sort((a, b) => a.ts - b.ts);
}

function visitSightings(state: TrafficState, venue: SimVenue, plan: DayPlan, index: number): Sighting[] {
  const v = plan.visits[index]!;
  const rng = Random.for(state.seed, venue.key, plan.date, 'sight', index);
  const out: Sighting[] = [];
  let ts = v.arrive + rng.between(0, 2) * MINUTE;
  let first = true;
  while (ts < v.leave) {
    out.push({
      ts,
      device: v.device!,
      zone: v.zone,
      strength: rng.between(0.45, 1),
      associated: v.associated,
      first,
      arrive: v.arrive,
      leave: v.leave,
      key: `${plan.date}/v${index}`,
    });
    first = false;
    ts += rng.between(5, 11) * MINUTE;
  }
  return out;
}

/** An AP's MAC for a zone: infrastructure, stable per venue and zone. */
export function apMac(state: TrafficState, venue: SimVenue, zone: string | null): string {
  const rng = Random.for(state.seed, venue.key, 'ap', zone ?? 'street');
  return ['00:18:0a', ...rng.hex(3).match(/../g)!].join(':');
}
