import type { Ch } from '../../clickhouse/client.js';
import {
  occupancyBefore,
  periodFlowEvents,
  storedOccupancy,
  storedZoneOccupancy,
  type FlowEventRow,
} from '../../clickhouse/queries/derive.js';
import { compareFlows, flowOf, periodSeries, type Flow } from '../../domain/analytics/occupancy-rule.js';
import { dayString, localDayNumber } from '../../domain/telemetry/calendar.js';
import { changes, nextVersion } from './changes.js';
import type { VenueDeriveContext } from './context.js';
import type { Period } from './periods.js';
import { recomputeVisits } from './visits.js';
import type { RoundWrites } from './writes.js';

/** Rows written by one recomputation; a figure its marks cannot have changed is not recomputed (undefined). */
export interface Written {
  visits?: number;
  occupancy?: number;
}

/**
 * The change an event makes to the whole venue's count (docs/processors.md#occupancy); events at
 * an area or counter zone, or at a zone no longer active, do not count for the venue.
 */
export function venueFlowOf(e: FlowEventRow, zones: Map<string, string>): Flow | undefined {
  if (e.zone_id !== '') {
    const type = zones.get(e.zone_id);
    if (type !== 'entrance' && type !== 'exit') return undefined;
  }
  const flow = flowOf(e.event_type, e);
  return flow && { ts: e.at, id: e.event_id, ...flow };
}

/** The whole venue's occupancy points of a period: its start at 0, then the figure after each instant with flows. */
export function occupancyPoints(flows: Flow[], p: Period): Array<{ at: number; value: number }> {
  if (flows.length === 0) return [];
  const series = periodSeries([...flows].sort(compareFlows));
  const points = series[0]!.ts === p.start ? [] : [{ at: p.start, value: 0 }];
  for (const s of series) points.push({ at: s.ts, value: s.value });
  return points;
}

/**
 * The change an event makes to its own zone's count: only at an active area or counter zone (a
 * door counts for the venue, docs/processors.md#occupancy).
 */
export function zoneFlowOf(e: FlowEventRow, zones: Map<string, string>): Flow | undefined {
  const type = e.zone_id === '' ? undefined : zones.get(e.zone_id);
  if (type !== 'area' && type !== 'counter') return undefined;
  const flow = flowOf(e.event_type, e);
  return flow && { ts: e.at, id: e.event_id, ...flow };
}

type Points = Array<{ at: number; value: number }>;

/** The figures after each instant of flows that continue from a stored figure (no period-start point). */
function continuedPoints(flows: Flow[], from: number): Points {
  return periodSeries([...flows].sort(compareFlows), from).map((s) => ({ at: s.ts, value: s.value }));
}

/**
 * How far back before the first changed instant a recomputation looks for the figures it continues
 * from, nearest first: a busy venue has a figure in the last minute, and reading the hour before
 * instead would read up to an hour of its points every round. The hour is read only when the
 * minute lacks one of the figures (a zone quiet for a while).
 */
export const OCCUPANCY_LOOKBACKS_MS: readonly number[] = [60_000, 3_600_000];

type OccupancyInput = Awaited<ReturnType<typeof occupancyInput>>;

/** What a recomputation of [fromMs, toMs) reads: the flows (the venue's, each zone's) and the stored points. */
async function occupancyInput(ch: Ch, v: VenueDeriveContext, fromMs: number, toMs: number) {
  const range = { operatorId: v.operatorId, venueId: v.venueId, fromMs, toMs };
  const [events, stored, storedZones] = await Promise.all([
    periodFlowEvents(ch, range),
    storedOccupancy(ch, range),
    storedZoneOccupancy(ch, range),
  ]);
  const flows = events.map((e) => venueFlowOf(e, v.zones)).filter((f): f is Flow => f !== undefined);
  const zoneFlows = new Map<string, Flow[]>();
  for (const e of events) {
    const f = zoneFlowOf(e, v.zones);
    if (!f) continue;
    const list = zoneFlows.get(e.zone_id);
    if (list) list.push(f);
    else zoneFlows.set(e.zone_id, [f]);
  }
  return { flows, zoneFlows, stored, storedZones };
}

/** The input of two adjoining ranges as one. */
function joined(a: OccupancyInput, b: OccupancyInput): OccupancyInput {
  const zoneFlows = new Map(a.zoneFlows);
  for (const [zone, f] of b.zoneFlows) zoneFlows.set(zone, [...(zoneFlows.get(zone) ?? []), ...f]);
  return {
    flows: [...a.flows, ...b.flows],
    zoneFlows,
    stored: [...a.stored, ...b.stored],
    storedZones: [...a.storedZones, ...b.storedZones],
  };
}

/**
 * A period's occupancy history from the raw events, the whole venue's (door events) and each area
 * or counter zone's (its own events), given to `out` where it differs from what is stored. A figure
 * depends only on the flows up to its instant, so only the instants from the first changed second
 * (`seenFrom`) on are recomputed, continuing from the venue's and each zone's last stored figure
 * before it (OCCUPANCY_LOOKBACKS_MS); where one of them has no stored figure in the hour before,
 * the whole period is.
 */
export async function recomputeOccupancy(ch: Ch, v: VenueDeriveContext, p: Period, out: RoundWrites, seenFrom = p.start): Promise<number> {
  const from = Math.floor(Math.max(seenFrom, p.start) / 1000) * 1000;
  const whole = (input: OccupancyInput) => addOccupancyChanges(out, v, input, (f) => occupancyPoints(f, p));
  if (from === p.start) return whole(await occupancyInput(ch, v, p.start, p.end));
  const before = (i: number) =>
    occupancyBefore(ch, {
      operatorId: v.operatorId,
      venueId: v.venueId,
      fromMs: Math.max(p.start, from - OCCUPANCY_LOOKBACKS_MS[i]!),
      beforeMs: from,
    });
  const [input, first] = await Promise.all([occupancyInput(ch, v, from, p.end), before(0)]);
  const known = (b: typeof first) =>
    (input.flows.length === 0 || b.venue !== undefined) && [...input.zoneFlows.keys()].every((z) => b.zones.has(z));
  let base = first;
  for (let i = 1; !known(base); i++) {
    // No further look-back, or the last one already reached the period's start.
    // The whole period then: only the part before `from` is still to read.
    if (i === OCCUPANCY_LOOKBACKS_MS.length || from - OCCUPANCY_LOOKBACKS_MS[i - 1]! <= p.start)
      return whole(joined(await occupancyInput(ch, v, p.start, from), input));
    base = await before(i);
  }
  return addOccupancyChanges(out, v, input, (f, zone) =>
    continuedPoints(f, (zone === undefined ? base.venue : base.zones.get(zone))!.value),
  );
}

/** Gives `out` the points computed from `input` (by `pointsOf`, per zone or for the venue) where they differ from the stored ones. */
function addOccupancyChanges(
  out: RoundWrites,
  v: VenueDeriveContext,
  { flows, zoneFlows, stored, storedZones }: Awaited<ReturnType<typeof occupancyInput>>,
  pointsOf: (flows: Flow[], zone?: string) => Points,
): number {
  const venue = changes(
    flows.length > 0 ? pointsOf(flows) : [],
    stored,
    (x) => String(x.at),
    (a, b) => a.value === b.value,
  );
  const computedZones = [...zoneFlows].flatMap(([zone_id, f]) => pointsOf(f, zone_id).map((x) => ({ zone_id, ...x })));
  const zones = changes(
    computedZones,
    storedZones,
    (x) => `${x.zone_id}|${x.at}`,
    (a, b) => a.value === b.value,
  );
  const written = venue.upserts.length + venue.removed.length + zones.upserts.length + zones.removed.length;
  if (written === 0) return 0;
  const version = nextVersion();
  const row = (x: { at: number; value: number }, live: number) => ({
    operator_id: v.operatorId,
    venue_id: v.venueId,
    ts: Math.floor(x.at / 1000),
    ts_ms: x.at % 1000,
    local_day: dayString(localDayNumber(x.at, v.timezone)),
    value: x.value,
    retention_days: v.retentionDays,
    live,
    version,
  });
  const zoneRow = (x: { zone_id: string; at: number; value: number }, live: number) => ({ ...row(x, live), zone_id: x.zone_id });
  out.addOccupancy([...venue.upserts.map((x) => row(x, 1)), ...venue.removed.map((x) => row(x, 0))]);
  out.addZoneOccupancy([...zones.upserts.map((x) => zoneRow(x, 1)), ...zones.removed.map((x) => zoneRow(x, 0))]);
  return written;
}

/** The event times (epoch ms, inclusive) a venue's new sightings and new door flows span; either may be absent. */
export interface MarkedRanges {
  visits?: [number, number];
  occupancy?: [number, number];
}

const touches = (r: [number, number] | undefined, p: Period): r is [number, number] => r !== undefined && r[0] < p.end && r[1] >= p.start;

/** A venue period whose sightings or door flows changed in the marked ranges: what they can have changed is recomputed. */
export async function recomputePeriod(ch: Ch, v: VenueDeriveContext, p: Period, ranges: MarkedRanges, out: RoundWrites): Promise<Written> {
  const { visits: seen, occupancy: flows } = ranges;
  const [visits, occupancy] = await Promise.all([
    touches(seen, p) ? recomputeVisits(ch, v, p, seen[0], seen[1], out) : undefined,
    touches(flows, p) ? recomputeOccupancy(ch, v, p, out, flows[0]) : undefined,
  ]);
  return { visits, occupancy };
}
