import type { Ch } from '../../clickhouse/client.js';
import { telemetryDocument, telemetrySeries, type Aggregation } from '../../clickhouse/queries/telemetry.js';
import { JsonStream } from '../../lib/json-stream.js';
import { isLargeRead } from '../limits/query-limits.js';
import type { TelemetryKey } from '../../lib/events.js';
import type { Queryable } from '../../postgres/client.js';
import { ownedVenue } from '../venues/access.js';
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
  const plan = planBuckets(req.startTs, req.endTs, req.interval, venue.timezone);
  // The common case (no gap filling, minute or hour buckets) is answered with the JSON document
  // ClickHouse builds, streamed through: tens of thousands of points are never decoded here.
  if (req.fill === 'none' && plan.resolution !== '1d') {
    if (plan.count === 0) return JsonStream.of(JSON.stringify(Object.fromEntries(req.keys.map((k) => [k, []]))));
    const sequential = isLargeRead(req.keys.length * plan.count);
    return new JsonStream(await telemetryDocument(deps.ch, { ...plan, operatorId, venueId, keys: req.keys, agg: req.agg }, { sequential }));
  }
  const rows =
    plan.count === 0
      ? []
      : await telemetrySeries(deps.ch, { ...plan, operatorId, venueId, keys: req.keys, agg: req.agg });
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
