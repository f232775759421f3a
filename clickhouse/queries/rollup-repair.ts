import { chRows, chsql, clusterOf, literal, localDatabaseOf, raw, withSettings, type Ch, type ChSql } from '../client.js';
import { serverExecutor, type ChExecutor } from '../migrate.js';
import type { EventRow } from './events.js';

/**
 * Repairs the tables the raw `events` table's views write, for rows an insert stored without its
 * views: an INSERT writes the raw part and then each view's part, and a server that dies between
 * them keeps the raw part only. The sink's retry then finds the rows stored (or, on a replicated
 * table, is deduplicated as a block, views included), so nothing else would bring the views back.
 * See docs/pipeline.md#materialized-views-and-partial-failure.
 */

/** One venue's suspect rows: their event-time bounds (epoch seconds) and local days. */
export interface RepairScope {
  operatorId: string;
  venueId: string;
  fromTs: number;
  toTs: number;
  days: string[];
}

export interface RollupRepair {
  /** (table, key, bucket) rows compared. */
  checked: number;
  /** Rows whose missing count and sum were added. */
  toppedUp: number;
  /** Rows holding more than the raw table: not repairable by adding, reported (none expected). */
  excess: number;
}

/** What a raw event contributes to the minute and hour rollups (migrations 0004, 0007). */
const KEYED =
  raw(`arrayConcat(['events'], arrayMap(k -> if(k = 'occupancy', 'occupancy_reported', k), metric_names), if(device = '', emptyArrayString(), ['devices'])) AS key,
           arrayConcat([1.], metric_values, if(device = '', emptyArrayFloat64(), [0.])) AS value`);
/** …and to the daily rollup, which has no devices key (migration 0009). */
const KEYED_DAILY = raw(`arrayConcat(['events'], arrayMap(k -> if(k = 'occupancy', 'occupancy_reported', k), metric_names)) AS key,
           arrayConcat([1.], metric_values) AS value`);

interface Rollup {
  table: string;
  /** The bucket column, and its value computed from a raw row. */
  column: 'bucket' | 'day';
  of: string;
  keyed: ChSql;
  /** Which (key, value) pairs the count, sum, min and max take; devices are counted apart. */
  counted: ChSql;
  devices: ChSql;
}

const ROLLUPS: Rollup[] = [
  {
    table: 'telemetry_1m',
    column: 'bucket',
    of: 'toStartOfMinute(ts)',
    keyed: KEYED,
    counted: raw(`key != 'devices'`),
    devices: raw(`key = 'devices'`),
  },
  {
    table: 'telemetry_1h',
    column: 'bucket',
    of: 'toStartOfHour(ts)',
    keyed: KEYED,
    counted: raw(`key != 'devices'`),
    devices: raw(`key = 'devices'`),
  },
  { table: 'telemetry_1d', column: 'day', of: 'local_day', keyed: KEYED_DAILY, counted: raw('1'), devices: raw('0') },
];

/** A bucket as text (a DateTime as its epoch seconds), and that text back in the column's type. */
const asText = (r: Rollup, expr: string): ChSql => raw(r.column === 'day' ? `toString(${expr})` : `toString(toUInt32(${expr}))`);
const fromText = (r: Rollup, b: string): string => (r.column === 'day' ? `toDate(${literal(b)})` : `toDateTime(${Number(b)})`);

/** Where the repair reads and writes (the same engine; chdb in tests). */
export interface Engines {
  read: ChExecutor;
  write: ChExecutor;
}

/** A server's engines: the writer never deduplicates (a repair block may equal an earlier block of a replicated table and still be needed). */
export const serverEngines = (ch: Ch): Engines => ({
  read: serverExecutor(ch),
  write: serverExecutor(withSettings(ch, { insert_deduplicate: 0 })),
});

/** One scope per venue of the rows. */
export function repairScopes(rows: readonly Pick<EventRow, 'operator_id' | 'venue_id' | 'ts' | 'local_day'>[]): RepairScope[] {
  const scopes = new Map<string, RepairScope & { daySet: Set<string> }>();
  for (const r of rows) {
    let s = scopes.get(r.venue_id);
    if (!s)
      scopes.set(
        r.venue_id,
        (s = { operatorId: r.operator_id, venueId: r.venue_id, fromTs: r.ts, toTs: r.ts, days: [], daySet: new Set() }),
      );
    s.fromTs = Math.min(s.fromTs, r.ts);
    s.toTs = Math.max(s.toTs, r.ts);
    s.daySet.add(r.local_day);
  }
  return [...scopes.values()].map(({ daySet, ...s }) => ({ ...s, days: [...daySet] }));
}

interface Figures {
  key: string;
  /** The bucket as text. */
  b: string;
  retention_days: number;
  c: string;
  s: number;
  u: string;
}

const ofVenue = (s: RepairScope): ChSql => chsql`operator_id = toUUID(${s.operatorId}) AND venue_id = toUUID(${s.venueId})`;
const dayList = (s: RepairScope): ChSql => raw(s.days.map((d) => `toDate(${literal(d)})`).join(', '));
/** Whole hours around the rows (the minute and hour buckets they touch). */
const hoursOf = (s: RepairScope) => ({ from: Math.floor(s.fromTs / 3600) * 3600, to: Math.floor(s.toTs / 3600) * 3600 + 3600 });

/** The raw rows a scope's buckets hold: whole minutes and hours around the rows, whole local days. */
function rawWhere(s: RepairScope, r: Rollup | undefined): ChSql {
  if (r?.column === 'day') {
    const [first, last] = [s.days.reduce((a, b) => (a < b ? a : b)), s.days.reduce((a, b) => (a > b ? a : b))];
    // A local day lies within 14 h before and 38 h after its UTC date's midnight.
    const from = Date.parse(`${first}T00:00:00Z`) / 1000 - 14 * 3600;
    const to = Date.parse(`${last}T00:00:00Z`) / 1000 + 38 * 3600;
    return chsql`${ofVenue(s)} AND ts >= toDateTime(${from}) AND ts < toDateTime(${to}) AND local_day IN (${dayList(s)})`;
  }
  const { from, to } = hoursOf(s);
  return chsql`${ofVenue(s)} AND ts >= toDateTime(${from}) AND ts < toDateTime(${to})`;
}

function rollupWhere(r: Rollup, s: RepairScope): ChSql {
  if (r.column === 'day') return chsql`${ofVenue(s)} AND day IN (${dayList(s)})`;
  const { from, to } = hoursOf(s);
  return chsql`${ofVenue(s)} AND bucket >= toDateTime(${from}) AND bucket < toDateTime(${to})`;
}

const id = (f: Pick<Figures, 'key' | 'b' | 'retention_days'>) => `${f.key}\t${f.b}\t${f.retention_days}`;

async function repairRollup(on: Engines, r: Rollup, s: RepairScope): Promise<RollupRepair> {
  // Raw first: nothing else writes this venue meanwhile (its events are on one Kafka partition,
  // whose sink is the caller), so the two reads see the same inserts.
  const fromRaw = await on.read.query<Figures>(
    chsql`SELECT key, ${asText(r, r.of)} AS b, retention_days,
                 toString(countIf(${r.counted})) AS c, sumIf(value, ${r.counted}) AS s, toString(uniqExactIf(device, ${r.devices})) AS u
          FROM events ARRAY JOIN ${r.keyed}
          WHERE ${rawWhere(s, r)}
          GROUP BY key, b, retention_days`.text,
  );
  const inRollup = new Map(
    (
      await on.read.query<Figures>(
        chsql`SELECT key, ${asText(r, r.column)} AS b, retention_days,
                     toString(countMerge(v_count)) AS c, sumMerge(v_sum) AS s, toString(uniqExactMerge(devices)) AS u
              FROM ${raw(r.table)}
              WHERE ${rollupWhere(r, s)} AND key != 'occupancy'
              GROUP BY key, b, retention_days`.text,
      )
    ).map((f) => [id(f), f]),
  );
  const out: RollupRepair = { checked: fromRaw.length, toppedUp: 0, excess: 0 };
  const short: Array<Figures & { dc: number; ds: number }> = [];
  let stale = false;
  for (const f of fromRaw) {
    const has = inRollup.get(id(f));
    const [c, u] = [Number(f.c), Number(f.u)];
    const [hc, hu] = [Number(has?.c ?? 0), Number(has?.u ?? 0)];
    if (hc > c || hu > u) out.excess++;
    else if (hc < c) short.push({ ...f, dc: c - hc, ds: f.s - (has?.s ?? 0) });
    else if (hu < u) stale = true;
  }
  if (short.length === 0 && !stale) return out;
  const b = raw(r.column);
  // Min, max and devices merge idempotently: the whole buckets' states from the raw rows, adding nothing to count or sum.
  await on.write.exec(
    chsql`INSERT INTO ${raw(r.table)} (operator_id, venue_id, key, ${b}, retention_days, v_sum, v_count, v_min, v_max, devices)
          SELECT operator_id, venue_id, key, ${raw(r.of)} AS ${b}, retention_days,
                 sumStateIf(value, 0), countStateIf(0), minStateIf(value, ${r.counted}), maxStateIf(value, ${r.counted}), uniqExactStateIf(device, ${r.devices})
          FROM events ARRAY JOIN ${r.keyed}
          WHERE ${rawWhere(s, r)}
          GROUP BY operator_id, venue_id, key, ${b}, retention_days`.text,
  );
  if (short.length > 0) {
    // Count and sum add up: the missing part of each, as that many rows of which the first carries the sum.
    const tuples = short.map(
      (f) => `(${literal(f.key)}, ${fromText(r, f.b)}, toUInt16(${f.retention_days}), toUInt64(${f.dc}), toFloat64(${f.ds}))`,
    );
    await on.write.exec(
      chsql`INSERT INTO ${raw(r.table)} (operator_id, venue_id, key, ${b}, retention_days, v_sum, v_count, v_min, v_max, devices)
            SELECT toUUID(${s.operatorId}), toUUID(${s.venueId}), k, kb, rd,
                   sumState(if(n = 0, ds, 0.)), countState(), minStateIf(toFloat64(0), 0), maxStateIf(toFloat64(0), 0), uniqExactStateIf('', 0)
            FROM (SELECT tupleElement(t, 1) AS k, tupleElement(t, 2) AS kb, tupleElement(t, 3) AS rd, tupleElement(t, 4) AS dc, tupleElement(t, 5) AS ds
                  FROM (SELECT arrayJoin([${raw(tuples.join(', '))}]) AS t))
            ARRAY JOIN range(dc) AS n
            GROUP BY k, kb, rd`.text,
    );
    out.toppedUp = short.length;
  }
  return out;
}

/**
 * Compares each rollup's rows in the scopes with what the raw rows give and adds what is missing;
 * re-writes the scopes' retention classes and derive marks (both idempotent), which the same cut
 * can lose. Only for scopes whose raw rows are all stored and whose views nobody else writes now.
 */
export async function repairRollups(on: Engines, scopes: readonly RepairScope[]): Promise<RollupRepair> {
  const total: RollupRepair = { checked: 0, toppedUp: 0, excess: 0 };
  for (const s of scopes) {
    for (const r of ROLLUPS) {
      const got = await repairRollup(on, r, s);
      total.checked += got.checked;
      total.toppedUp += got.toppedUp;
      total.excess += got.excess;
    }
    const where = rawWhere(s, undefined);
    await on.write.exec(chsql`INSERT INTO retention_classes SELECT DISTINCT operator_id, retention_days FROM events WHERE ${where}`.text);
    await on.write.exec(
      chsql`INSERT INTO derive_marks (mark_id, operator_id, venue_id, min_ts, max_ts, inserted_at)
            SELECT rand64(), toUUID(${s.operatorId}), toUUID(${s.venueId}), toDateTime(${s.fromTs}), toDateTime(${s.toTs}), now()`.text,
    );
  }
  return total;
}

/**
 * Whether reads see what every replica holds: always on one server; on a cluster, when every node
 * answers and no replica has replication work queued. Until then a replica may miss parts its mate
 * took (or the dead one holds), and a comparison could add what is only late.
 */
export async function replicasSettled(ch: Ch): Promise<boolean> {
  const cluster = clusterOf(ch);
  if (!cluster) return true;
  const local = await localDatabaseOf(ch, cluster);
  for (const url of cluster.nodes) {
    const node = cluster.nodeClient(url, local, { requestTimeoutMs: 5_000 });
    try {
      const [r] = await chRows<{ queued: string; readonly: string }>(
        node,
        chsql`SELECT toString(sum(queue_size)) AS queued, toString(sum(is_readonly)) AS readonly FROM system.replicas WHERE database = ${local}`,
      );
      if (Number(r?.queued ?? 0) > 0 || Number(r?.readonly ?? 0) > 0) return false;
    } catch {
      // A node that does not answer may hold parts nobody else has yet: not settled, asked again on the next try.
      return false;
    } finally {
      await node.close();
    }
  }
  return true;
}
