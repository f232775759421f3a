import { chRows, chsql, insertRows, type Ch, type ChSql } from '../client.js';

/** Columns every derived row carries for the sink (replay key, retention class). */
interface Sunk {
  retention_days: number;
  kafka_topic: string;
  kafka_partition: number;
  kafka_offset: string;
}

export interface OccupancyRow extends Sunk {
  operator_id: string;
  venue_id: string;
  zone_id: string;
  ts: number;
  ts_ms: number;
  local_day: string;
  value: number;
  capacity: number | null;
  percent: number | null;
  reason: string;
  clamped: number;
}

export interface VisitRow extends Sunk {
  visit_id: string;
  operator_id: string;
  venue_id: string;
  zone_id: string;
  device: string;
  randomized_mac: number;
  ts: number;
  ts_ms: number;
  ended_at: number;
  dwell_seconds: number;
  sightings: number;
  local_day: string;
}

export interface HealthRow extends Sunk {
  operator_id: string;
  venue_id: string;
  integration_id: string;
  connector_type: string;
  status: string;
  previous: string;
  transition: number;
  last_event_at: number;
  has_last_event: number;
  rejection_rate: number;
  reason: string;
  ts: number;
  ts_ms: number;
}

export const insertOccupancy = (ch: Ch, rows: OccupancyRow[]) => insertRows(ch, 'occupancy_updates', rows);
export const insertVisits = (ch: Ch, rows: VisitRow[]) => insertRows(ch, 'visits', rows);
export const insertHealth = (ch: Ch, rows: HealthRow[]) => insertRows(ch, 'connector_health', rows);

/** The newest figure of the venue ('' zone) and of each zone of one venue. */
export function currentOccupancySql(q: { operatorId: string; venueId: string }): ChSql {
  return chsql`SELECT zone_id, argMax(value, (ts, ts_ms, kafka_partition, kafka_offset)) AS value,
                      toFloat64(toUInt64(max(ts)) * 1000 + argMax(ts_ms, (ts, ts_ms))) AS at
                 FROM occupancy_updates
                WHERE operator_id = toUUID(${q.operatorId}) AND venue_id = toUUID(${q.venueId})
                GROUP BY zone_id ORDER BY zone_id`;
}

export async function currentOccupancy(ch: Ch, q: { operatorId: string; venueId: string }): Promise<Array<{ zone_id: string; value: number; at: number }>> {
  const rows = await chRows<{ zone_id: string; value: number; at: number }>(ch, currentOccupancySql(q));
  return rows.map((r) => ({ zone_id: r.zone_id, value: Number(r.value), at: Number(r.at) }));
}

/** Visits started in [fromSec, toSec) per zone ('' = whole venue) and dwell bucket (index into the dwell bucket list). */
export function dwellHistogramSql(q: { operatorId: string; venueId: string; fromSec: number; toSec: number }): ChSql {
  return chsql`SELECT zone_id, toUInt8(multiIf(dwell_seconds < 300, 0, dwell_seconds < 900, 1, dwell_seconds < 1800, 2, dwell_seconds < 3600, 3, 4)) AS bucket,
                      toUInt32(count()) AS visits
                 FROM visits
                WHERE operator_id = toUUID(${q.operatorId}) AND venue_id = toUUID(${q.venueId})
                  AND ts >= toDateTime(${q.fromSec}, 'UTC') AND ts < toDateTime(${q.toSec}, 'UTC')
                GROUP BY zone_id, bucket ORDER BY zone_id, bucket`;
}

export async function dwellHistogram(ch: Ch, q: { operatorId: string; venueId: string; fromSec: number; toSec: number }) {
  return chRows<{ zone_id: string; bucket: number; visits: number }>(ch, dwellHistogramSql(q));
}

/** Mean dwell of the operator's whole-venue visits started in [fromSec, toSec); 0 without visits. */
export function averageDwellSql(q: { operatorId: string; fromSec: number; toSec: number }): ChSql {
  return chsql`SELECT toFloat64(if(count() = 0, 0, avg(dwell_seconds))) AS avg_dwell
                 FROM visits
                WHERE operator_id = toUUID(${q.operatorId}) AND zone_id = ''
                  AND ts >= toDateTime(${q.fromSec}, 'UTC') AND ts < toDateTime(${q.toSec}, 'UTC')`;
}

export async function averageDwell(ch: Ch, q: { operatorId: string; fromSec: number; toSec: number }): Promise<number> {
  const [row] = await chRows<{ avg_dwell: number }>(ch, averageDwellSql(q));
  return row?.avg_dwell ?? 0;
}

/** Devices per number of distinct visit days (local days `fromDay`..`toDay`), from the loyalty rollup. */
export function visitDaysSql(q: { operatorId: string; venueId: string; fromDay: string; toDay: string }): ChSql {
  return chsql`SELECT toUInt32(days) AS days, toUInt32(count()) AS devices FROM (
                 SELECT device, uniqExact(day) AS days FROM visit_days
                  WHERE operator_id = toUUID(${q.operatorId}) AND venue_id = toUUID(${q.venueId})
                    AND day >= toDate(${q.fromDay}) AND day <= toDate(${q.toDay})
                  GROUP BY device)
               GROUP BY days ORDER BY days`;
}

export async function visitDays(ch: Ch, q: { operatorId: string; venueId: string; fromDay: string; toDay: string }) {
  return chRows<{ days: number; devices: number }>(ch, visitDaysSql(q));
}

/** The latest health row per integration among `integrationIds`, no older than `sinceSec`. */
export function latestHealthSql(q: { operatorId: string; integrationIds: string[]; sinceSec: number }): ChSql {
  return chsql`SELECT toString(integration_id) AS integration_id,
                      argMax(status, (ts, ts_ms, kafka_offset)) AS status,
                      toUInt32(argMax(last_event_at, (ts, ts_ms, kafka_offset))) AS last_event_at,
                      toUInt8(argMax(has_last_event, (ts, ts_ms, kafka_offset))) AS has_last_event
                 FROM connector_health
                WHERE operator_id = toUUID(${q.operatorId}) AND has(${q.integrationIds}, toString(integration_id))
                  AND ts >= toDateTime(${q.sinceSec}, 'UTC')
                GROUP BY integration_id ORDER BY integration_id`;
}

export async function latestHealth(ch: Ch, q: { operatorId: string; integrationIds: string[]; sinceSec: number }) {
  if (q.integrationIds.length === 0) return [];
  return chRows<{ integration_id: string; status: string; last_event_at: number; has_last_event: number }>(ch, latestHealthSql(q));
}
