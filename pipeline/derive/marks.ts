import { MARK_KIND, type Mark } from '../../clickhouse/queries/derive.js';
import type { MarkedRanges } from './recompute.js';

/** A venue's marks of a round: the event times (epoch ms) their sightings and their door flows span. */
export interface VenueMarks {
  operator_id: string;
  venue_id: string;
  ranges: MarkedRanges;
}

const widen = (r: [number, number] | undefined, from: number, to: number): [number, number] =>
  r ? [Math.min(r[0], from), Math.max(r[1], to)] : [from, to];

/** One entry per venue (and operator) spanning all of its marks' event times, by what they can change. */
export function byVenue(marks: Mark[]): VenueMarks[] {
  const out = new Map<string, VenueMarks>();
  for (const m of marks) {
    const key = `${m.venue_id}|${m.operator_id}`;
    let o = out.get(key);
    if (!o) out.set(key, (o = { operator_id: m.operator_id, venue_id: m.venue_id, ranges: {} }));
    const [from, to] = [m.min_ts * 1000, m.max_ts * 1000 + 999];
    if (m.kind !== MARK_KIND.flows) o.ranges.visits = widen(o.ranges.visits, from, to);
    if (m.kind !== MARK_KIND.sightings) o.ranges.occupancy = widen(o.ranges.occupancy, from, to);
  }
  return [...out.values()];
}
