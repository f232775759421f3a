import { chTsvRows, chsql, raw, type Ch, type ChSql } from '../client.js';

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
  keys: string[];
  agg: Aggregation;
}

/** Minute or hour rollup rows with bucket start in [fromSec, toSec), grouped into epoch-aligned buckets of bucketSec. */
export interface EpochSeriesQuery extends SeriesBase {
  resolution: '1m' | '1h';
  fromSec: number;
  toSec: number;
  bucketSec: number;
}

/** Local-day rollup rows with day in [fromDay, toDay] (`YYYY-MM-DD`), grouped into buckets of bucketDays counted from 1970-01-01. */
export interface DaySeriesQuery extends SeriesBase {
  resolution: '1d';
  fromDay: string;
  toDay: string;
  bucketDays: number;
}

export type SeriesQuery = EpochSeriesQuery | DaySeriesQuery;

/** One bucket of one key: `t` is the bucket start, epoch seconds (1m/1h) or a day number (1d). */
export interface SeriesRow {
  key: string;
  t: number;
  value: number | null;
}

const ROLLUP_SECONDS = { '1m': 60, '1h': 3600 } as const;

function seriesSelect(q: SeriesQuery, keys: string[], value: string): ChSql {
  const scope = chsql`operator_id = toUUID(${q.operatorId}) AND venue_id = toUUID(${q.venueId}) AND has(${keys}, key)`;
  if (q.resolution === '1d') {
    return chsql`SELECT key, toUInt32(intDiv(toRelativeDayNum(day), ${q.bucketDays}) * ${q.bucketDays}) AS t, ${raw(value)} AS value
                   FROM telemetry_1d
                  WHERE ${scope} AND day >= toDate(${q.fromDay}) AND day <= toDate(${q.toDay})
                  GROUP BY key, t`;
  }
  // Buckets of the rollup's own size are its rows' buckets: grouping by them skips a division per row.
  const t = q.bucketSec === ROLLUP_SECONDS[q.resolution] ? raw('toUInt32(bucket)') : chsql`toUInt32(intDiv(toUInt32(bucket), ${q.bucketSec}) * ${q.bucketSec})`;
  return chsql`SELECT key, ${t} AS t, ${raw(value)} AS value
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
  const measured = q.keys.filter((k) => k !== 'devices');
  if (measured.length > 0) selects.push(seriesSelect(q, measured, `toFloat64(${AGG_EXPR[q.agg]})`));
  if (q.keys.includes('devices')) selects.push(seriesSelect(q, ['devices'], DEVICES_EXPR));
  return raw(`SELECT key, t, value FROM (${selects.map((x) => x.text).join(' UNION ALL ')}) ORDER BY key, t`);
}

/** `nan` (a bucket with no count) and `\N` read as null; keys never hold tabs or escapes. */
const tsvNumber = (field: string): number | null => (field === 'nan' || field === '\\N' ? null : Number(field));

export async function telemetrySeries(ch: Ch, q: SeriesQuery): Promise<SeriesRow[]> {
  return (await chTsvRows(ch, telemetrySeriesSql(q))).map(([key, t, value]) => ({ key: key!, t: Number(t), value: tsvNumber(value!) }));
}

/**
 * The same series as JSON text, built by ClickHouse: per key, `{"ts":…,"value":…}` items in bucket
 * order joined by commas (ts in epoch ms; a bucket without a finite value is null). Epoch-aligned
 * resolutions only: day buckets start at local midnight, which is computed in TypeScript.
 */
export function telemetryJsonSql(q: EpochSeriesQuery): ChSql {
  const item = `concat('{"ts":', toString(toUInt64(t) * 1000), ',"value":', if(isFinite(value), toString(value), 'null'), '}')`;
  return raw(
    `SELECT key, arrayStringConcat(arrayMap(x -> x.2, arraySort(x -> x.1, groupArray((t, ${item})))), ',') AS points ` +
      `FROM (${telemetrySeriesSql(q).text}) GROUP BY key ORDER BY key`,
  );
}

/** Key → its points as JSON array items (without the brackets); keys without data are absent. */
export async function telemetryJson(ch: Ch, q: EpochSeriesQuery): Promise<Map<string, string>> {
  return new Map((await chTsvRows(ch, telemetryJsonSql(q))).map(([key, points]) => [key!, points!]));
}
