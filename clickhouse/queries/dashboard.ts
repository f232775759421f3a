import { chRows, chsql, type Ch, type ChSql } from '../client.js';
import { operatorRows } from './operator-rows.js';

export interface OperatorWindow {
  operatorId: string;
  fromSec: number;
  toSec: number;
}

/** Raw events of the operator with event time in [fromSec, toSec). */
export function operatorEventCountSql(q: OperatorWindow): ChSql {
  return chsql`SELECT toFloat64(count()) AS events FROM events
                WHERE ${operatorRows(q.operatorId)}
                  AND ts >= toDateTime(${q.fromSec}, 'UTC') AND ts < toDateTime(${q.toSec}, 'UTC')`;
}

export async function operatorEventCount(ch: Ch, q: OperatorWindow): Promise<number> {
  const [row] = await chRows<{ events: number }>(ch, operatorEventCountSql(q));
  return row?.events ?? 0;
}

const ACTIVITY_KEYS = ['events', 'entries', 'exits'] as const;
export type ActivityKey = (typeof ACTIVITY_KEYS)[number];

/** Events, entries and exits of all the operator's venues from the hourly rollup, in UTC buckets of bucketSec. */
export function operatorActivitySql(q: OperatorWindow & { bucketSec: number }): ChSql {
  return chsql`SELECT toUInt32(intDiv(toUInt32(bucket), ${q.bucketSec}) * ${q.bucketSec}) AS t, key, sumMerge(v_sum) AS value
                 FROM telemetry_1h
                WHERE ${operatorRows(q.operatorId)} AND has(${[...ACTIVITY_KEYS]}, key)
                  AND bucket >= toDateTime(${q.fromSec}, 'UTC') AND bucket < toDateTime(${q.toSec}, 'UTC')
                GROUP BY t, key ORDER BY t, key`;
}

export async function operatorActivity(
  ch: Ch,
  q: OperatorWindow & { bucketSec: number },
): Promise<Array<{ t: number; key: ActivityKey; value: number }>> {
  return chRows(ch, operatorActivitySql(q));
}
