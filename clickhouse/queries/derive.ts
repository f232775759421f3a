import { randomBytes } from 'node:crypto';
import { chRows, chTsvRows, chsql, insertRows, insertTsv, raw, tsvField, tsvNumber, tsvString, type Ch, type ChSql } from '../client.js';
import { operatorRows } from './operator-rows.js';

/** The derive job's marks, progress and occupancy history (pipeline/derive/, migration 0010); its visits are in derive-visits.ts. */

/** The marks inserted at or after `sinceSec`: which venue's flow or sighting events an insert stored, over which event-time range. */
export function marksSinceSql(sinceSec: number): ChSql {
  return chsql`SELECT toString(mark_id) AS mark_id, toString(operator_id) AS operator_id, toString(venue_id) AS venue_id,
                      toUInt32(min_ts) AS min_ts, toUInt32(max_ts) AS max_ts, toUInt32(inserted_at) AS inserted_at, kind
                 FROM derive_marks WHERE inserted_at >= toDateTime(${sinceSec}, 'UTC')`;
}

/** What a mark's events can change (migration 0012): sightings the visits, door flows the occupancy history. */
export const MARK_KIND = { both: 0, sightings: 1, flows: 2 } as const;

export interface Mark {
  mark_id: string;
  operator_id: string;
  venue_id: string;
  min_ts: number;
  max_ts: number;
  inserted_at: number;
  /** MARK_KIND: 0 (marks from before migration 0012, the rollup repair's) may be either. */
  kind: number;
}

const marksOf = (rows: Mark[]): Mark[] =>
  rows.map((r) => ({
    ...r,
    min_ts: Number(r.min_ts),
    max_ts: Number(r.max_ts),
    inserted_at: Number(r.inserted_at),
    kind: Number(r.kind ?? MARK_KIND.both),
  }));

export async function marksSince(ch: Ch, sinceSec: number): Promise<Mark[]> {
  return marksOf(await chRows<Mark>(ch, marksSinceSql(sinceSec)));
}

/** Every venue's stored flow and sighting events as marks (the first run rebuilds everything). */
export async function allEventsAsMarks(ch: Ch): Promise<Mark[]> {
  return marksOf(
    await chRows<Mark>(
      ch,
      chsql`SELECT 'rebuild' AS mark_id, toString(operator_id) AS operator_id, toString(venue_id) AS venue_id,
                   toUInt32(min(ts)) AS min_ts, toUInt32(max(ts)) AS max_ts, toUInt32(0) AS inserted_at, toUInt8(${MARK_KIND.both}) AS kind
              FROM events WHERE event_type IN ('device_seen', 'device_left', 'entry', 'exit', 'occupancy')
             GROUP BY operator_id, venue_id ORDER BY venue_id`,
    ),
  );
}

/** The server's clock, epoch seconds: marks carry its time, so the cursor must too. */
export async function serverNow(ch: Ch): Promise<number> {
  const [row] = await chRows<{ now: number }>(ch, chsql`SELECT toUInt32(now()) AS now`);
  return Number(row!.now);
}

export async function progressCursor(ch: Ch, name: string): Promise<number | undefined> {
  const [row] = await chRows<{ cursor: number }>(
    ch,
    chsql`SELECT toUInt32(argMax(cursor, version)) AS cursor, count() AS n FROM derive_progress WHERE name = ${name} HAVING n > 0`,
  );
  return row ? Number(row.cursor) : undefined;
}

/** A mark the derive job writes itself: a venue's periods a round carried over to the next. */
export interface CarriedMark {
  operator_id: string;
  venue_id: string;
  min_ts: number;
  max_ts: number;
  kind: number;
}

/** Inserted as of `atSec` (the next round's cursor), so the next round reads them. */
export async function insertCarriedMarks(ch: Ch, marks: readonly CarriedMark[], atSec: number): Promise<void> {
  if (marks.length === 0) return;
  await insertRows(
    ch,
    'derive_marks',
    marks.map((m) => ({ mark_id: randomBytes(6).readUIntBE(0, 6), ...m, inserted_at: atSec })),
  );
}

/**
 * Whether the job `name` has finished a round that started after `sinceSec` and left nothing for
 * the next: no mark is inserted at or after its cursor (a round that carries periods over marks
 * them as of the cursor it saves, and the job starts the next round a second later, so its cursor
 * is past them).
 */
export async function deriveCaughtUp(ch: Ch, name: string, sinceSec: number): Promise<boolean> {
  const cursor = await progressCursor(ch, name);
  if (cursor === undefined || cursor <= sinceSec) return false;
  const [row] = await chRows<{ n: number }>(
    ch,
    chsql`SELECT count() AS n FROM derive_marks WHERE inserted_at >= toDateTime(${cursor}, 'UTC')`,
  );
  return Number(row!.n) === 0;
}

export async function saveProgress(ch: Ch, name: string, cursorSec: number, version: number): Promise<void> {
  await insertRows(ch, 'derive_progress', [{ name, cursor: cursorSec, version }]);
}

/** A flow event of the period: time, zone, type, id and the metrics occupancy reads. */
export interface FlowEventRow {
  at: number;
  zone_id: string;
  event_type: string;
  event_id: string;
  occupancy: number | null;
  entries: number | null;
  exits: number | null;
}

const metric = (name: string) => raw(`if(has(metric_names, '${name}'), metric_values[indexOf(metric_names, '${name}')], NULL)`);

/**
 * Every flow event of a range the job recomputes. Read as TabSeparated, and the occupancy points
 * written so: after the sightings, the largest row counts the job handles (benchmarks/README.md,
 * "The derive job's occupancy rows as TabSeparated").
 */
export async function periodFlowEvents(
  ch: Ch,
  q: { operatorId: string; venueId: string; fromMs: number; toMs: number },
): Promise<FlowEventRow[]> {
  return chTsvRows(
    ch,
    chsql`SELECT toUInt64(ts) * 1000 + ts_ms AS at, zone_id, event_type, toString(event_id) AS event_id,
                 ${metric('occupancy')} AS occupancy, ${metric('entries')} AS entries, ${metric('exits')} AS exits
            FROM events
           WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId})
             AND ts >= toDateTime(${Math.floor(q.fromMs / 1000)}, 'UTC') AND ts < toDateTime(${Math.floor(q.toMs / 1000)}, 'UTC')
             AND event_type IN ('entry', 'exit', 'occupancy')`,
    (f) => ({
      at: Number(f[0]),
      zone_id: tsvField(f[1]!),
      event_type: f[2]!,
      event_id: f[3]!,
      occupancy: tsvNumber(f[4]!),
      entries: tsvNumber(f[5]!),
      exits: tsvNumber(f[6]!),
    }),
  );
}

/** The live occupancy points stored for a venue in [fromMs, toMs). */
export async function storedOccupancy(
  ch: Ch,
  q: { operatorId: string; venueId: string; fromMs: number; toMs: number },
): Promise<Array<{ at: number; value: number }>> {
  return chTsvRows(
    ch,
    chsql`SELECT toUInt64(ts) * 1000 + ts_ms AS at, argMax(value, version) AS value, argMax(live, version) AS alive
            FROM derived_occupancy
           WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId})
             AND ts >= toDateTime(${Math.floor(q.fromMs / 1000)}, 'UTC') AND ts < toDateTime(${Math.floor(q.toMs / 1000)}, 'UTC')
           GROUP BY ts, ts_ms HAVING alive = 1`,
    (f) => ({ at: Number(f[0]), value: Number(f[1]) }),
  );
}

export interface DerivedOccupancyRow {
  operator_id: string;
  venue_id: string;
  ts: number;
  ts_ms: number;
  local_day: string;
  value: number;
  retention_days: number;
  live: number;
  version: number;
}

const OCCUPANCY_COLUMNS = ['operator_id', 'venue_id', 'ts', 'ts_ms', 'local_day', 'value', 'retention_days', 'live', 'version'];
const occupancyFields = (r: DerivedOccupancyRow) =>
  `${r.operator_id}\t${r.venue_id}\t${r.ts}\t${r.ts_ms}\t${r.local_day}\t${r.value}\t${r.retention_days}\t${r.live}\t${r.version}`;

export const insertDerivedOccupancy = (ch: Ch, rows: DerivedOccupancyRow[]) =>
  insertTsv(ch, 'derived_occupancy', OCCUPANCY_COLUMNS, rows, (r) => `${occupancyFields(r)}\n`);

/** Drops the marks' day partitions entirely older than `beforeSec`. */
export async function dropOldMarks(ch: Ch, beforeSec: number): Promise<void> {
  const old = await chRows<{ partition_id: string }>(
    ch,
    chsql`SELECT DISTINCT partition_id FROM system.parts
           WHERE database = currentDatabase() AND table = 'derive_marks' AND active
             AND partition_id < toString(toYYYYMMDD(toDateTime(${beforeSec}, 'UTC')))`,
  );
  for (const { partition_id } of old) await ch.command({ query: chsql`ALTER TABLE derive_marks DROP PARTITION ID ${partition_id}`.text });
}

/** The area and counter zones' occupancy points stored for a venue in [fromMs, toMs). */
export async function storedZoneOccupancy(
  ch: Ch,
  q: { operatorId: string; venueId: string; fromMs: number; toMs: number },
): Promise<Array<{ zone_id: string; at: number; value: number }>> {
  return chTsvRows(
    ch,
    chsql`SELECT zone_id, toUInt64(ts) * 1000 + ts_ms AS at, argMax(value, version) AS value, argMax(live, version) AS alive
            FROM derived_zone_occupancy
           WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId})
             AND ts >= toDateTime(${Math.floor(q.fromMs / 1000)}, 'UTC') AND ts < toDateTime(${Math.floor(q.toMs / 1000)}, 'UTC')
           GROUP BY zone_id, ts, ts_ms HAVING alive = 1`,
    (f) => ({ zone_id: tsvField(f[0]!), at: Number(f[1]), value: Number(f[2]) }),
  );
}

export interface DerivedZoneOccupancyRow extends DerivedOccupancyRow {
  zone_id: string;
}

export const insertDerivedZoneOccupancy = (ch: Ch, rows: DerivedZoneOccupancyRow[]) =>
  insertTsv(
    ch,
    'derived_zone_occupancy',
    [...OCCUPANCY_COLUMNS, 'zone_id'],
    rows,
    (r) => `${occupancyFields(r)}\t${tsvString(r.zone_id)}\n`,
  );

/** The query of `occupancyBefore`: one row per zone ('' for the venue), `last_at` '0' when the venue has none. */
export function occupancyBeforeSql(q: { operatorId: string; venueId: string; fromMs: number; beforeMs: number }): ChSql {
  const scope = chsql`${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId})
             AND ts >= toDateTime(${Math.floor(q.fromMs / 1000)}, 'UTC') AND ts < toDateTime(${Math.floor(q.beforeMs / 1000)}, 'UTC')`;
  return chsql`SELECT zone_id, last_at, last_value FROM (
          SELECT '' AS zone_id, toString(max(at)) AS last_at, argMax(value, at) AS last_value
            FROM (SELECT toUInt64(ts) * 1000 + ts_ms AS at, argMax(value, version) AS value, argMax(live, version) AS alive
                    FROM derived_occupancy WHERE ${scope} GROUP BY ts, ts_ms HAVING alive = 1)
          UNION ALL
          SELECT zone_id, toString(max(at)) AS last_at, argMax(value, at) AS last_value
            FROM (SELECT zone_id, toUInt64(ts) * 1000 + ts_ms AS at, argMax(value, version) AS value, argMax(live, version) AS alive
                    FROM derived_zone_occupancy WHERE ${scope} GROUP BY zone_id, ts, ts_ms HAVING alive = 1)
          GROUP BY zone_id)
        ORDER BY zone_id`;
}

/**
 * The last live point before `beforeMs` of the venue and of each of its zones, looked for in
 * [fromMs, beforeMs): the figures a recomputation from `beforeMs` on starts from.
 */
export async function occupancyBefore(
  ch: Ch,
  q: { operatorId: string; venueId: string; fromMs: number; beforeMs: number },
): Promise<{ venue?: { at: number; value: number }; zones: Map<string, { at: number; value: number }> }> {
  const rows = await chRows<{ zone_id: string; last_at: string; last_value: number }>(ch, occupancyBeforeSql(q));
  const zones = new Map<string, { at: number; value: number }>();
  let venue: { at: number; value: number } | undefined;
  for (const r of rows) {
    const point = { at: Number(r.last_at), value: Number(r.last_value) };
    // No point in the range: the venue's aggregate over no rows gives 0.
    if (point.at === 0) continue;
    if (r.zone_id === '') venue = point;
    else zones.set(r.zone_id, point);
  }
  return { venue, zones };
}
