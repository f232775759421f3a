import type { Readable } from 'node:stream';
import { jsonObjectOfRows } from '../../lib/json-stream.js';
import { chTsvRows, chsql, raw, tsvNumber, type Ch, type ChSql } from '../client.js';
import { operatorRows } from './operator-rows.js';

export const AGGREGATIONS = ['AVG', 'MAX', 'MIN', 'SUM', 'COUNT'] as const;
export type Aggregation = (typeof AGGREGATIONS)[number];

/** Merges of the rollup states; every value leaves as Float64 (JSON numbers, never quoted 64-bit ints). */
const AGG_EXPR: Record<Aggregation, string> = {
  AVG: 'sumMerge(v_sum) / countMerge(v_count)',
  SUM: 'sumMerge(v_sum)',
  MIN: 'minMerge(v_min)',
  MAX: 'maxMerge(v_max)',
  COUNT: 'countMerge(v_count)',
};

/** `devices` is the distinct devices of the whole bucket whatever the aggregation: states merge exactly. */
const DEVICES_EXPR = 'toFloat64(uniqExactMerge(devices))';

interface SeriesBase {
  operatorId: string;
  venueId: string;
  /** An area or counter zone of the venue: its own occupancy history instead of the venue's (`occupancy` only). */
  zoneId?: string;
  keys: string[];
  agg: Aggregation;
}

/** Minute or hour rollup rows with bucket start in [fromSec, toSec), grouped into epoch-aligned buckets of bucketSec. */
export interface EpochRange {
  resolution: '1m' | '1h';
  fromSec: number;
  toSec: number;
  bucketSec: number;
}

/** Local-day rollup rows with day in [fromDay, toDay] (`YYYY-MM-DD`), grouped into buckets of bucketDays counted from 1970-01-01. */
export interface DayRange {
  resolution: '1d';
  fromDay: string;
  toDay: string;
  bucketDays: number;
  /** The venue's zone; [fromSec, toSec) is the same range of days as instants (epoch seconds), for `devices`. */
  timezone: string;
  fromSec: number;
  toSec: number;
}

export interface EpochSeriesQuery extends SeriesBase, EpochRange {}
export interface DaySeriesQuery extends SeriesBase, DayRange {}

export type SeriesQuery = EpochSeriesQuery | DaySeriesQuery;

/** One bucket of one key: `t` is the bucket start, epoch seconds (1m/1h) or a day number (1d). */
export interface SeriesRow {
  key: string;
  t: number;
  value: number | null;
}

const ROLLUP_SECONDS = { '1m': 60, '1h': 3600 } as const;

/** A row's bucket start in epoch seconds. Buckets of the rollup's own size are its rows' buckets: grouping by them skips a division per row. */
function bucketExpr(q: EpochSeriesQuery): ChSql {
  return q.bucketSec === ROLLUP_SECONDS[q.resolution]
    ? raw('toUInt32(bucket)')
    : chsql`toUInt32(intDiv(toUInt32(bucket), ${q.bucketSec}) * ${q.bucketSec})`;
}

/**
 * Distinct devices per bucket of local days. The daily rollup keeps no device sets (migration
 * 0009): a day's set is the union of the hourly sets of the hours inside it and the minute sets of
 * an hour that local midnight cuts (zones a fractional number of hours from UTC), and uniqExact
 * states merge into that union exactly. The zone is a constant of the query, so ClickHouse places
 * each hour and minute in its local day, DST included.
 */
function dailyDevicesSelect(q: DaySeriesQuery): ChSql {
  const scope = chsql`${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId}) AND key = 'devices'
                      AND bucket >= toDateTime(${q.fromSec}, 'UTC') AND bucket < toDateTime(${q.toSec}, 'UTC')`;
  const cut = (hour: ChSql) => chsql`(toDate(${hour}, ${q.timezone}) != toDate(addSeconds(${hour}, 3599), ${q.timezone}))`;
  return chsql`SELECT 'devices' AS key, toUInt32(intDiv(toRelativeDayNum(toDate(b, ${q.timezone})), ${q.bucketDays}) * ${q.bucketDays}) AS t, ${raw(DEVICES_EXPR)} AS value
                 FROM (SELECT bucket AS b, devices FROM telemetry_1h WHERE ${scope} AND NOT ${cut(raw('bucket'))}
                       UNION ALL
                       SELECT bucket AS b, devices FROM telemetry_1m WHERE ${scope} AND ${cut(raw('toStartOfHour(bucket)'))})
                GROUP BY t`;
}

/** `occupancy` is not rolled up: it is the derived history's points (migration 0010), newest version per instant. */
const OCCUPANCY_AGG: Record<Aggregation, string> = {
  AVG: 'avg(value)',
  SUM: 'sum(value)',
  MIN: 'min(value)',
  MAX: 'max(value)',
  COUNT: 'count()',
};

function occupancyPoints(q: { operatorId: string; venueId: string; zoneId?: string; fromSec: number; toSec: number }): ChSql {
  const table = raw(q.zoneId === undefined ? 'derived_occupancy' : 'derived_zone_occupancy');
  const zone = q.zoneId === undefined ? raw('') : chsql`AND zone_id = ${q.zoneId}`;
  return chsql`(SELECT ts, ts_ms, any(local_day) AS local_day, argMax(value, version) AS value, argMax(live, version) AS alive
                  FROM ${table}
                 WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId}) ${zone}
                   AND ts >= toDateTime(${q.fromSec}, 'UTC') AND ts < toDateTime(${q.toSec}, 'UTC')
                 GROUP BY ts, ts_ms)`;
}

function occupancySelect(q: SeriesQuery): ChSql {
  const value = raw(`toFloat64(${OCCUPANCY_AGG[q.agg]})`);
  if (q.resolution === '1d') {
    return chsql`SELECT 'occupancy' AS key, toUInt32(intDiv(toRelativeDayNum(local_day), ${q.bucketDays}) * ${q.bucketDays}) AS t, ${value} AS value
                   FROM ${occupancyPoints(q)} WHERE alive = 1 GROUP BY t`;
  }
  return chsql`SELECT 'occupancy' AS key, toUInt32(intDiv(toUInt32(ts), ${q.bucketSec}) * ${q.bucketSec}) AS t, ${value} AS value
                 FROM ${occupancyPoints(q)} WHERE alive = 1 GROUP BY t`;
}

function seriesSelect(q: SeriesQuery, keys: string[], value: string): ChSql {
  if (q.resolution === '1d' && keys.includes('devices')) return dailyDevicesSelect(q);
  const scope = chsql`${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId}) AND has(${keys}, key)`;
  if (q.resolution === '1d') {
    return chsql`SELECT key, toUInt32(intDiv(toRelativeDayNum(day), ${q.bucketDays}) * ${q.bucketDays}) AS t, ${raw(value)} AS value
                   FROM telemetry_1d
                  WHERE ${scope} AND day >= toDate(${q.fromDay}) AND day <= toDate(${q.toDay})
                  GROUP BY key, t`;
  }
  return chsql`SELECT key, ${bucketExpr(q)} AS t, ${raw(value)} AS value
                 FROM ${raw(q.resolution === '1m' ? 'telemetry_1m' : 'telemetry_1h')}
                WHERE ${scope} AND bucket >= toDateTime(${q.fromSec}, 'UTC') AND bucket < toDateTime(${q.toSec}, 'UTC')
                GROUP BY key, t`;
}

/**
 * The device sets are by far the largest column of every rollup, so they are read only when
 * `devices` is asked for, in a SELECT of their own (a single expression choosing per key would
 * make ClickHouse read and merge them for every row).
 */
export function telemetrySeriesSql(q: SeriesQuery): ChSql {
  const selects: ChSql[] = [];
  if (q.keys.includes('occupancy')) selects.push(occupancySelect(q));
  const measured = q.keys.filter((k) => k !== 'devices' && k !== 'occupancy');
  if (measured.length > 0) selects.push(seriesSelect(q, measured, `toFloat64(${AGG_EXPR[q.agg]})`));
  if (q.keys.includes('devices')) selects.push(seriesSelect(q, ['devices'], DEVICES_EXPR));
  return raw(`SELECT key, t, value FROM (${selects.map((x) => x.text).join(' UNION ALL ')}) ORDER BY key, t`);
}

/**
 * A telemetry query reads a few granules of a few parts, and the same ones again for the next
 * question on the venue: keeping their decompressed blocks spares decompressing them again (the
 * server's `uncompressed_cache_size` bounds it; a read of over a million rows skips it; figures:
 * benchmarks/README.md#benchquery).
 */
const READ_SETTINGS = { use_uncompressed_cache: 1 } as const;

/** A bucket with no count (`nan`) reads as null (`tsvNumber`); keys never hold tabs or escapes. */
export async function telemetrySeries(ch: Ch, q: SeriesQuery): Promise<SeriesRow[]> {
  return chTsvRows(ch, telemetrySeriesSql(q), (f) => ({ key: f[0]!, t: Number(f[1]), value: tsvNumber(f[2]!) }), READ_SETTINGS);
}

/**
 * One key's points as JSONEachRow rows `{"ts":…,"value":…}` in bucket order: ts in epoch ms (a
 * Float64, so no engine quotes it), a bucket without a finite value null (both engines write nan
 * as null). Epoch-aligned resolutions only: day buckets start at local midnight, computed in TypeScript.
 */
export function telemetryPointsSql(q: EpochSeriesQuery, key: string): ChSql {
  if (key === 'occupancy') return chsql`SELECT toFloat64(t) * 1000 AS ts, value FROM (${occupancySelect(q)}) ORDER BY t`;
  const value = key === 'devices' ? DEVICES_EXPR : `toFloat64(${AGG_EXPR[q.agg]})`;
  // `key =` (not `has`) lets 18.16 read only the key's granules; no subquery: one grouping, by bucket.
  return chsql`SELECT toFloat64(${bucketExpr(q)} AS t) * 1000 AS ts, ${raw(value)} AS value
                 FROM ${raw(q.resolution === '1m' ? 'telemetry_1m' : 'telemetry_1h')}
                WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId}) AND key = ${key}
                  AND bucket >= toDateTime(${q.fromSec}, 'UTC') AND bucket < toDateTime(${q.toSec}, 'UTC')
                GROUP BY t ORDER BY t`;
}

/**
 * The answer as one JSON document (`{"<key>":[points…],…}`, keys in the order asked) made of
 * ClickHouse's own JSONEachRow output, for the caller to pass on without decoding it. One query per
 * key, in parallel: each sorts by bucket alone and formats its rows on its own thread; `sequential`
 * (a large read) runs them one after another, so the read uses one thread however many keys it
 * asks. ClickHouse answers only once a query is complete (`wait_end_of_query`), so a failure is an
 * error here, never a cut-off document.
 */
export async function telemetryDocument(ch: Ch, q: EpochSeriesQuery, { sequential = false } = {}): Promise<Readable> {
  // The keys' queries already run side by side: a thread each keeps them from crowding the cores.
  const settings = { ...READ_SETTINGS, wait_end_of_query: 1, ...(q.keys.length > 1 ? { max_threads: 1 } : {}) } as const;
  const run = (key: string) => ch.exec({ query: `${telemetryPointsSql(q, key).text} FORMAT JSONEachRow`, clickhouse_settings: settings });
  const answers: Array<PromiseSettledResult<{ stream: Readable }>> = [];
  if (sequential) {
    for (const key of q.keys) {
      const [answer] = await Promise.allSettled([run(key)]);
      answers.push(answer!);
      if (answer!.status === 'rejected') break;
    }
  } else answers.push(...(await Promise.allSettled(q.keys.map(run))));
  const failed = answers.find((a) => a.status === 'rejected');
  if (failed) {
    for (const a of answers) if (a.status === 'fulfilled') a.value.stream.destroy();
    throw failed.reason;
  }
  return jsonObjectOfRows(q.keys.map((key, i) => [key, (answers[i] as PromiseFulfilledResult<{ stream: Readable }>).value.stream]));
}
