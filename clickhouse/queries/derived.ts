import { chRows, chsql, insertRows, raw, type Ch, type ChSql } from '../client.js';
import { operatorRows } from './operator-rows.js';

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
export const insertHealth = (ch: Ch, rows: HealthRow[]) => insertRows(ch, 'connector_health', rows);

/** The newest figure of the venue ('' zone) and of each zone of one venue. */
export function currentOccupancySql(q: { operatorId: string; venueId: string }): ChSql {
  return chsql`SELECT zone_id, argMax(value, (ts, ts_ms, kafka_partition, kafka_offset)) AS value,
                      toFloat64(toUInt64(max(ts)) * 1000 + argMax(ts_ms, (ts, ts_ms))) AS at
                 FROM occupancy_updates
                WHERE operator_id = toUUID(${q.operatorId}) AND venue_id = toUUID(${q.venueId})
                GROUP BY zone_id ORDER BY zone_id`;
}

export async function currentOccupancy(
  ch: Ch,
  q: { operatorId: string; venueId: string },
): Promise<Array<{ zone_id: string; value: number; at: number }>> {
  const rows = await chRows<{ zone_id: string; value: number; at: number }>(ch, currentOccupancySql(q));
  return rows.map((r) => ({ zone_id: r.zone_id, value: Number(r.value), at: Number(r.at) }));
}

/**
 * The newest version of each derived visit of the venue(s) in `scope` whose start falls in
 * [fromMs, toMs) (migration 0010: a visit is rewritten when late data changes it, and removed
 * with live = 0). `day` bounds the partitions read: a visit's day is its period's local date,
 * at most a day before or after its UTC start.
 */
export function visitsStarted(scope: ChSql, q: { fromMs: number; toMs: number }): ChSql {
  const fromDay = Math.floor(q.fromMs / 86_400_000) - 1;
  const toDay = Math.floor(q.toMs / 86_400_000) + 1;
  return chsql`(SELECT venue_id AS venue, zone_id, device, start_ms, argMax(end_ms, version) AS end_ms, argMax(closes_ms, version) AS closes_ms, argMax(live, version) AS alive
                  FROM derived_visits
                 WHERE ${scope} AND day >= toDate(${fromDay}) AND day <= toDate(${toDay})
                   AND start_ms >= ${q.fromMs} AND start_ms < ${q.toMs}
                 GROUP BY venue, zone_id, device, start_ms)`;
}

/** Dwell in whole seconds (rounded half up). */
export const DWELL_S = raw('intDiv(end_ms - start_ms + 500, 1000)');

/** Ended visits (closed before nowMs) started in [fromMs, toMs) per zone ('' = whole venue) and dwell bucket (index into the dwell bucket list). */
export function dwellHistogramSql(q: { operatorId: string; venueId: string; fromMs: number; toMs: number; nowMs: number }): ChSql {
  return chsql`SELECT zone_id, toUInt8(multiIf(d < 300, 0, d < 900, 1, d < 1800, 2, d < 3600, 3, 4)) AS bucket, toUInt32(count()) AS visits
                 FROM (SELECT zone_id, ${DWELL_S} AS d
                         FROM ${visitsStarted(chsql`${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId})`, q)}
                        WHERE alive = 1 AND closes_ms < ${q.nowMs})
                GROUP BY zone_id, bucket ORDER BY zone_id, bucket`;
}

export async function dwellHistogram(ch: Ch, q: { operatorId: string; venueId: string; fromMs: number; toMs: number; nowMs: number }) {
  return chRows<{ zone_id: string; bucket: number; visits: number }>(ch, dwellHistogramSql(q));
}

/** Mean dwell of the operator's ended whole-venue visits started in [fromMs, toMs); 0 without visits. */
export function averageDwellSql(q: { operatorId: string; fromMs: number; toMs: number; nowMs: number }): ChSql {
  return chsql`SELECT toFloat64(if(count() = 0, 0, avg(${DWELL_S}))) AS avg_dwell
                 FROM ${visitsStarted(chsql`${operatorRows(q.operatorId)} AND zone_id = ''`, q)}
                WHERE alive = 1 AND closes_ms < ${q.nowMs}`;
}

export async function averageDwell(ch: Ch, q: { operatorId: string; fromMs: number; toMs: number; nowMs: number }): Promise<number> {
  const [row] = await chRows<{ avg_dwell: number }>(ch, averageDwellSql(q));
  return row?.avg_dwell ?? 0;
}

/**
 * Devices per number of distinct visit days (days `fromDay`..`toDay`: the local dates the venue's
 * periods start on) from the whole-venue visits, open ones included (a device visiting now counts
 * for today as soon as its visit qualifies).
 */
export function visitDaysSql(q: { operatorId: string; venueId: string; fromDay: string; toDay: string }): ChSql {
  return chsql`SELECT toUInt32(days) AS days, toUInt32(count()) AS devices FROM (
                 SELECT device, uniqExact(day) AS days FROM (
                   SELECT day, device, start_ms, argMax(live, version) AS alive FROM derived_visits
                    WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId}) AND zone_id = ''
                      AND day >= toDate(${q.fromDay}) AND day <= toDate(${q.toDay})
                    GROUP BY day, device, start_ms)
                  WHERE alive = 1 GROUP BY device)
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

/** Per UTC hour of [fromSec, toSec) with derived occupancy points: their mean, the last figure and its time (epoch seconds). */
export function occupancyHoursSql(q: { operatorId: string; venueId: string; fromSec: number; toSec: number }): ChSql {
  return chsql`SELECT toUInt32(toStartOfHour(ts)) AS t, toFloat64(avg(value)) AS mean, toFloat64(argMax(value, (ts, ts_ms))) AS last, toUInt32(max(ts)) AS last_at
                 FROM (SELECT ts, ts_ms, argMax(value, version) AS value, argMax(live, version) AS alive
                         FROM derived_occupancy
                        WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId})
                          AND ts >= toDateTime(${q.fromSec}, 'UTC') AND ts < toDateTime(${q.toSec}, 'UTC')
                        GROUP BY ts, ts_ms)
                WHERE alive = 1 GROUP BY t ORDER BY t`;
}

export async function occupancyHours(ch: Ch, q: { operatorId: string; venueId: string; fromSec: number; toSec: number }) {
  return (await chRows<{ t: number; mean: number; last: number; last_at: number }>(ch, occupancyHoursSql(q))).map((r) => ({
    t: Number(r.t),
    mean: Number(r.mean),
    last: Number(r.last),
    lastAt: Number(r.last_at),
  }));
}
