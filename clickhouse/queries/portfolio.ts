import { chRows, chsql, raw, type Ch, type ChSql } from '../client.js';
import { DWELL_S, visitsStarted } from './derived.js';
import { operatorRows } from './operator-rows.js';

/** One venue's window: from `fromMs` (its local day's start) to now. */
export interface VenueWindow {
  venueId: string;
  fromMs: number;
}

/** `from` per venue, by `transform` (one statement for any number of venues, on 18.16 too). */
const fromOf = (windows: VenueWindow[], toUnit: (ms: number) => number): ChSql =>
  chsql`transform(toString(venue_id), ${windows.map((w) => w.venueId)}, ${raw(`[${windows.map((w) => `toUInt64(${toUnit(w.fromMs)})`).join(', ')}]`)}, toUInt64(18446744073709551615))`;

/** The newest whole-venue figure ('' zone) of each of the venues. */
export function venueOccupanciesSql(q: { operatorId: string; venueIds: string[] }): ChSql {
  return chsql`SELECT toString(venue_id) AS venue_id, argMax(value, (ts, ts_ms, kafka_partition, kafka_offset)) AS value,
                      toFloat64(toUInt64(max(ts)) * 1000 + argMax(ts_ms, (ts, ts_ms))) AS at
                 FROM occupancy_updates
                WHERE operator_id = toUUID(${q.operatorId}) AND has(${q.venueIds}, toString(venue_id)) AND zone_id = ''
                GROUP BY venue_id`;
}

export async function venueOccupancies(
  ch: Ch,
  q: { operatorId: string; venueIds: string[] },
): Promise<Array<{ venue_id: string; value: number; at: number }>> {
  if (q.venueIds.length === 0) return [];
  return (await chRows<{ venue_id: string; value: number; at: number }>(ch, venueOccupanciesSql(q))).map((r) => ({
    venue_id: r.venue_id,
    value: Number(r.value),
    at: Number(r.at),
  }));
}

/** Events of each venue with event time in its window (up to now). */
export function eventsInWindowsSql(q: { operatorId: string; windows: VenueWindow[]; toSec: number }): ChSql {
  const earliest = Math.floor(Math.min(...q.windows.map((w) => w.fromMs)) / 1000);
  return chsql`SELECT toString(venue_id) AS venue_id, toFloat64(count()) AS events FROM events
                WHERE ${operatorRows(q.operatorId)} AND has(${q.windows.map((w) => w.venueId)}, toString(venue_id))
                  AND ts >= toDateTime(${earliest}, 'UTC') AND ts < toDateTime(${q.toSec}, 'UTC')
                  AND toUInt32(ts) >= ${fromOf(q.windows, (ms) => Math.floor(ms / 1000))}
                GROUP BY venue_id`;
}

export async function eventsInWindows(
  ch: Ch,
  q: { operatorId: string; windows: VenueWindow[]; toSec: number },
): Promise<Map<string, number>> {
  if (q.windows.length === 0) return new Map();
  return new Map(
    (await chRows<{ venue_id: string; events: number }>(ch, eventsInWindowsSql(q))).map((r) => [r.venue_id, Number(r.events)]),
  );
}

/**
 * Mean dwell (seconds) of each venue's ended whole-venue visits started in its window: the newest
 * version of each derived visit, as the dwell histogram reads them.
 */
export function dwellInWindowsSql(q: { operatorId: string; windows: VenueWindow[]; nowMs: number }): ChSql {
  const scope = chsql`${operatorRows(q.operatorId)} AND zone_id = '' AND has(${q.windows.map((w) => w.venueId)}, toString(venue_id))
                      AND start_ms >= ${fromOf(q.windows, (ms) => ms)}`;
  return chsql`SELECT toString(venue) AS venue_id, toFloat64(avg(${DWELL_S})) AS avg_dwell
                 FROM ${visitsStarted(scope, { fromMs: Math.min(...q.windows.map((w) => w.fromMs)), toMs: q.nowMs })}
                WHERE alive = 1 AND closes_ms < ${q.nowMs}
                GROUP BY venue`;
}

export async function dwellInWindows(
  ch: Ch,
  q: { operatorId: string; windows: VenueWindow[]; nowMs: number },
): Promise<Map<string, number>> {
  if (q.windows.length === 0) return new Map();
  return new Map(
    (await chRows<{ venue_id: string; avg_dwell: number }>(ch, dwellInWindowsSql(q))).map((r) => [r.venue_id, Number(r.avg_dwell)]),
  );
}
