import { MARK_KIND, type CarriedMark, type Mark } from '../../clickhouse/queries/derive.js';
import { PLAN_LIMITS } from '../../domain/tenants/plans.js';
import type { Db } from '../../postgres/client.js';
import { venueProcessorContexts } from '../../postgres/queries/venues.js';
import type { Period } from './periods.js';
import type { VenueDeriveContext } from './context.js';
import type { MarkedRanges } from './recompute.js';

/** A venue's marks of a round: the event times (epoch ms) their sightings and their door flows span. */
export interface VenueMarks {
  operator_id: string;
  venue_id: string;
  ranges: MarkedRanges;
}

const widen = (r: [number, number] | undefined, from: number, to: number): [number, number] =>
  r ? [Math.min(r[0], from), Math.max(r[1], to)] : [from, to];

/** The event times (epoch ms) a venue's marked ranges span together: the periods a round visits. */
export function markedSpan(r: MarkedRanges): [number, number] {
  const all = [r.visits, r.occupancy].filter((x) => x !== undefined);
  return [Math.min(...all.map((x) => x[0])), Math.max(...all.map((x) => x[1]))];
}

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

/**
 * Marks for the periods a round did not reach: per venue and kind, its marked range cut to the
 * span of those periods. A round takes a venue's newest periods first, so the ones left are its
 * oldest; should they not be contiguous, the span covers more than they need, never less.
 */
export function carriedMarks(left: ReadonlyArray<{ marks: VenueMarks; period: Period }>): CarriedMark[] {
  const spans = new Map<VenueMarks, [number, number]>();
  for (const { marks, period } of left) spans.set(marks, widen(spans.get(marks), period.start, period.end - 1));
  const out: CarriedMark[] = [];
  for (const [m, [from, to]] of spans) {
    const add = (r: [number, number] | undefined, kind: number) => {
      const [a, b] = r ? [Math.max(r[0], from), Math.min(r[1], to)] : [1, 0];
      if (a <= b)
        out.push({ operator_id: m.operator_id, venue_id: m.venue_id, min_ts: Math.floor(a / 1000), max_ts: Math.floor(b / 1000), kind });
    };
    add(m.ranges.visits, MARK_KIND.sightings);
    add(m.ranges.occupancy, MARK_KIND.flows);
  }
  return out;
}

/** What the derive job needs of the marked venues that are still active, by venue id (from Postgres). */
export async function deriveContexts(db: Db, marks: readonly VenueMarks[]): Promise<Map<string, VenueDeriveContext>> {
  const out = new Map<string, VenueDeriveContext>();
  if (marks.length === 0) return out;
  for (const v of await venueProcessorContexts(
    db,
    marks.map((m) => m.venue_id),
  )) {
    if (!v.is_active) continue;
    out.set(v.id, {
      operatorId: v.operator_id,
      venueId: v.id,
      timezone: v.timezone,
      resetHour: v.occupancy_reset_hour,
      retentionDays: PLAN_LIMITS[v.plan].retentionDays,
      zones: new Map(v.zones.map((z) => [z.id, z.type])),
    });
  }
  return out;
}
