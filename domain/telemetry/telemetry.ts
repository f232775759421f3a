import type { Ch } from '../../clickhouse/client.js';
import { telemetryDocument, telemetrySeries, type Aggregation } from '../../clickhouse/queries/telemetry.js';
import { JsonStream } from '../../lib/json-stream.js';
import { isLargeRead } from '../limits/query-limits.js';
import type { TelemetryKey } from '../../lib/events/vocabulary.js';
import type { Queryable } from '../../postgres/client.js';
import { ownedVenue } from '../venues/access.js';
import { activeZone } from '../../postgres/queries/zones.js';
import { validation } from '../../lib/errors.js';
import { planBuckets } from './buckets.js';

/**
 * Empty buckets: `none` omits them (default); `null` and `zero` return them with that value;
 * `previous` repeats the last value before them (buckets before the first value stay omitted).
 */
export const FILLS = ['none', 'null', 'zero', 'previous'] as const;
export type Fill = (typeof FILLS)[number];

export interface TelemetryRequest {
  keys: TelemetryKey[];
  startTs: number;
  endTs: number;
  interval: number;
  agg: Aggregation;
  fill: Fill;
  /** An area or counter zone of the venue: that zone's occupancy history (keys must be `occupancy` alone). */
  zoneId?: string;
}

export interface Point {
  ts: number;
  value: number | null;
}

/** Aggregated telemetry of one of the operator's venues, keyed by each requested key. */
export async function getTelemetry(
  deps: { db: Queryable; ch: Ch },
  operatorId: string,
  venueId: string,
  req: TelemetryRequest,
): Promise<Record<string, Point[]> | JsonStream> {
  const venue = await ownedVenue(deps.db, operatorId, venueId);
  if (req.zoneId !== undefined) await checkZoneSeries(deps.db, venueId, req.zoneId, req.keys);
  const plan = { ...planBuckets(req.startTs, req.endTs, req.interval, venue.timezone), zoneId: req.zoneId };
  // The common case (no gap filling, minute or hour buckets) is answered with the JSON document
  // ClickHouse builds, streamed through: tens of thousands of points are never decoded here.
  if (req.fill === 'none' && plan.resolution !== '1d') {
    if (plan.count === 0) return JsonStream.of(JSON.stringify(Object.fromEntries(req.keys.map((k) => [k, []]))));
    const sequential = isLargeRead(req.keys.length * plan.count);
    return new JsonStream(await telemetryDocument(deps.ch, { ...plan, operatorId, venueId, keys: req.keys, agg: req.agg }, { sequential }));
  }
  const rows = plan.count === 0 ? [] : await telemetrySeries(deps.ch, { ...plan, operatorId, venueId, keys: req.keys, agg: req.agg });
  const byKey = new Map<string, Map<number, number | null>>(req.keys.map((k) => [k, new Map()]));
  for (const r of rows) byKey.get(r.key)?.set(r.t, r.value);
  const out: Record<string, Point[]> = {};
  const buckets = req.fill === 'none' ? [] : plan.buckets();
  for (const [key, values] of byKey) out[key] = fillSeries(buckets, values, req.fill).map(([t, value]) => ({ ts: plan.startOf(t), value }));
  return out;
}

function fillSeries(buckets: number[], values: Map<number, number | null>, fill: Fill): Array<[number, number | null]> {
  if (fill === 'none') return [...values].sort((a, b) => a[0] - b[0]);
  const out: Array<[number, number | null]> = [];
  let previous: number | null | undefined;
  for (const t of buckets) {
    if (values.has(t)) previous = values.get(t)!;
    const value = values.has(t) ? values.get(t)! : fill === 'zero' ? 0 : fill === 'null' ? null : previous;
    if (value !== undefined) out.push([t, value]);
  }
  return out;
}

/**
 * A zone's series is its occupancy history: the other keys are rolled up per venue, and a door
 * zone has no occupancy of its own (its flows count for the venue).
 */
async function checkZoneSeries(db: Queryable, venueId: string, zoneId: string, keys: TelemetryKey[]): Promise<void> {
  const others = keys.filter((k) => k !== 'occupancy');
  if (others.length > 0) {
    throw validation('zoneId takes the occupancy key alone', [
      {
        field: 'keys',
        message: `with zoneId only occupancy has a per-zone history; ask for ${others.join(', ')} without zoneId (whole venue)`,
      },
    ]);
  }
  const zone = await activeZone(db, venueId, zoneId);
  if (!zone)
    throw validation('zoneId is not an active zone of this venue', [{ field: 'zoneId', message: 'not an active zone of this venue' }]);
  if (zone.type !== 'area' && zone.type !== 'counter') {
    throw validation(`zone "${zone.name}" is a door (${zone.type}): its people count for the venue`, [
      {
        field: 'zoneId',
        message: `a ${zone.type} zone has no occupancy of its own; leave zoneId out for the venue's, or name an area or counter zone`,
      },
    ]);
  }
}
