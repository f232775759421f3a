import { areaZones, doorZones } from '../venues.js';
import { event, grid, plansIn, type GeneratedEvent, type Generator } from './types.js';
import { areaOccupancy } from './density.js';
import { environmentAt } from './environment.js';

const BUCKET = 5 * 60_000;
const ENV_STEP = 5 * 60_000;

/**
 * Verkada: people-counting trend buckets of 5 minutes per door line (`entry` with `trend_in`,
 * `exit` with `trend_out`, stamped at the bucket's end, empty buckets skipped), camera occupancy of
 * each area zone, and SV environmental sensors every 5 minutes (with PM2.5 and TVOC).
 */
export const verkada: Generator = (w, venue, state) => {
  const out: GeneratedEvent[] = [];
  const doors = doorZones(venue);
  const plans = plansIn({ from: w.from - 86_400_000, to: w.to + 86_400_000 }, venue, state);
  for (const end of grid(w, BUCKET)) {
    const start = end - BUCKET;
    for (const door of doors) {
      let ins = 0;
      let outs = 0;
      for (const plan of plans) {
        if (end < plan.open - 3_600_000 || start > plan.close + 3_600_000) continue;
        for (const c of plan.crossings) {
          if (c.door !== door.slug || c.ts < start || c.ts >= end) continue;
          if (c.direction === 1) ins++;
          else outs++;
        }
      }
      const line = {
        camera_id: `cam_${venue.key.replace(/[^a-z]/g, '').slice(0, 6)}_${door.slug.replace(/[^a-z]/g, '')}`,
        line_id: door.slug,
        bucket_start: start / 1000,
        bucket_end: end / 1000,
        zone: door.slug,
      };
      if (ins > 0) out.push(event(end, 'entry', { ...line, count: ins }));
      if (outs > 0) out.push(event(end, 'exit', { ...line, count: outs }));
    }
  }
  for (const o of areaOccupancy(w, venue, state)) {
    out.push(
      event(o.ts, 'occupancy', {
        camera_id: `cam_${venue.key.replace(/[^a-z]/g, '').slice(0, 6)}_${o.zone.replace(/[^a-z]/g, '')}`,
        occupancy: o.occupancy,
        zone: o.zone,
      }),
    );
  }
  for (const ts of grid(w, ENV_STEP)) {
    for (const [i, zone] of areaZones(venue).entries()) {
      const r = environmentAt(state, venue, plans, zone, ts);
      out.push(event(ts, 'environment', { device_id: `sv11_sim${i}${venue.key.slice(0, 3)}`, ...r, zone: zone.slug }));
    }
  }
  return out;
};
