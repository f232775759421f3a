import { densitySpace, areaZones, type SimVenue } from '../venues.js';
import { presentAt, type TrafficState } from '../model.js';
import { event, grid, inWindow, plansIn, type GeneratedEvent, type Generator, type Window } from './types.js';

const OCCUPANCY_STEP = 5 * 60_000;

/**
 * Density: one v2 count webhook per person through a doorway (`entry` / `exit` with direction and
 * the space count after it), so a day's entries and exits balance; and the v3 occupancy of each
 * area zone every 5 minutes while the venue is open.
 */
export const density: Generator = (w, venue, state) => {
  const out: GeneratedEvent[] = [];
  const space = densitySpace(venue);
  for (const plan of state.plansFor(venue, w.from, w.to)) {
    for (const c of plan.crossings) {
      if (!inWindow(w, c.ts)) continue;
      out.push(
        event(c.ts, c.direction === 1 ? 'entry' : 'exit', {
          space_id: space,
          doorway_id: `drw_${venue.key.replace(/[^a-z]/g, '')}${c.door.replace(/[^a-z]/g, '')}`,
          direction: c.direction,
          count: c.count,
          zone: c.door,
        }),
      );
    }
  }
  for (const o of areaOccupancy(w, venue, state)) {
    out.push(
      event(o.ts, 'occupancy', {
        space_id: `${space}${o.zone.replace(/[^a-z]/g, '')}`,
        update_type: 'live',
        occupancy: o.occupancy,
        counting_mode: 'simple',
        space_health_status: 'healthy',
        zone: o.zone,
      }),
    );
  }
  return out;
};

/** Each area zone's head count every 5 minutes during opening hours (raised by an over-capacity fault). */
export function areaOccupancy(w: Window, venue: SimVenue, state: TrafficState): Array<{ ts: number; zone: string; occupancy: number }> {
  const out: Array<{ ts: number; zone: string; occupancy: number }> = [];
  for (const plan of plansIn(w, venue, state)) {
    for (const ts of grid({ from: Math.max(w.from, plan.open), to: Math.min(w.to, plan.close + OCCUPANCY_STEP) }, OCCUPANCY_STEP)) {
      for (const zone of areaZones(venue)) {
        const factor = state.overCapacity(venue, zone.slug, ts);
        const occupancy = factor === undefined ? presentAt(plan, ts, zone.slug) : Math.ceil(zone.capacity * factor);
        out.push({ ts, zone: zone.slug, occupancy });
      }
    }
  }
  return out;
}
