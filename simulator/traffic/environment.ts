import { presentAt, type DayPlan, type TrafficState } from '../model.js';
import { Random } from '../random.js';
import { localMinutes } from '../time.js';
import type { SimVenue, ZoneSpec } from '../venues.js';

export interface Reading {
  temperature: number;
  humidity: number;
  co2: number;
  noise: number;
  pm2_5: number;
  tvoc: number;
}

const round1 = (x: number) => Math.round(x * 10) / 10;

/** An area zone's air at an instant: a mild daily temperature swing, CO₂ and noise following the people in it. */
export function environmentAt(state: TrafficState, venue: SimVenue, plans: DayPlan[], zone: ZoneSpec, ts: number): Reading {
  const people = plans.reduce((n, p) => n + (p.open - 3_600_000 <= ts && ts <= p.close + 3_600_000 ? presentAt(p, ts, zone.slug) : 0), 0);
  const load = Math.min(1.5, people / Math.max(1, zone.capacity));
  const rng = Random.for(state.seed, venue.key, 'env', zone.slug, ts);
  const minute = localMinutes(ts, venue.timezone);
  const daily = Math.sin(((minute - 9 * 60) / 1440) * 2 * Math.PI);
  return {
    temperature: round1(20.5 + 1.2 * daily + 2.5 * load + rng.normal(0, 0.15)),
    humidity: round1(Math.min(100, Math.max(0, 40 + 6 * load - 3 * daily + rng.normal(0, 0.8)))),
    co2: Math.round(430 + 950 * load + rng.normal(0, 15)),
    noise: round1(32 + 30 * Math.min(1, load) + rng.normal(0, 1.5)),
    pm2_5: round1(Math.max(0, 4 + 6 * load + rng.normal(0, 0.8))),
    tvoc: Math.round(Math.max(0, 120 + 260 * load + rng.normal(0, 20))),
  };
}
