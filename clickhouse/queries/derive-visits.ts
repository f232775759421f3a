import { chRows, chsql, insertTsv, raw, tsvString, type Ch, type ChSql } from '../client.js';
import { operatorRows } from './operator-rows.js';

/** The derive job's visits: the sightings it cuts into runs, the runs at each period's checkpoint, the stored visits (migrations 0010, 0013). */

/** A visit as derived: scope ('' = whole venue), device, times in epoch ms. */
export interface DerivedVisit {
  zone_id: string;
  device: string;
  start_ms: number;
  end_ms: number;
  closes_ms: number;
  sightings: number;
  randomized_mac: number;
}

/** What a recomputation covers: a venue's period, and the devices seen in [seenFromMs, seenToMs] (their visits alone can have changed). */
export interface VisitScope {
  operatorId: string;
  venueId: string;
  fromMs: number;
  toMs: number;
  seenFromMs: number;
  seenToMs: number;
}

/** The devices with a sighting stored in the venue's marked range. */
function devicesSeen(q: VisitScope): ChSql {
  return chsql`(SELECT DISTINCT device FROM events
                 WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId})
                   AND ts >= toDateTime(${Math.floor(q.seenFromMs / 1000)}, 'UTC') AND ts <= toDateTime(${Math.floor(q.seenToMs / 1000)}, 'UTC')
                   AND event_type IN ('device_seen', 'device_left') AND device != '')`;
}

/** A scope's and device's sighting keys (domain/analytics/visit-runs.ts `sightingKey`, relative to `baseMs`), sorted. */
export interface ScopeKeys {
  zone_id: string;
  device: string;
  randomized_mac: number;
  keys: number[];
}

/**
 * The sightings of the devices seen in the marked range from `fromMs` (a whole second) to the
 * period's end, as sorted keys per scope (the whole venue '', and the sighting's zone) and device:
 * the derive job cuts them into visits (pipeline/derive/visits.ts). Keys are ms since `baseMs`
 * (the period's start) times 2, plus 1 for a `device_left`: a UInt32 for any period up to 24 days.
 */
export function sightingKeysSql(q: VisitScope & { baseMs: number }): ChSql {
  // A marked range that covers the read is no filter: the scan is not made twice.
  const everyone =
    Math.floor(q.seenFromMs / 1000) <= Math.floor(q.fromMs / 1000) && Math.floor(q.seenToMs / 1000) >= Math.floor(q.toMs / 1000) - 1;
  return chsql`SELECT scope AS zone_id, device, toUInt8(any(randomized_mac)) AS randomized_mac, arraySort(groupArray(key)) AS keys
                 FROM (SELECT device, randomized_mac, zone_id AS z,
                              toUInt32(((toUInt64(ts) * 1000 + ts_ms) - ${q.baseMs}) * 2 + (event_type = 'device_left')) AS key
                         FROM events
                        WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId})
                          AND ts >= toDateTime(${Math.floor(q.fromMs / 1000)}, 'UTC') AND ts < toDateTime(${Math.floor(q.toMs / 1000)}, 'UTC')
                          AND event_type IN ('device_seen', 'device_left') AND device != ''
                          ${everyone ? raw('') : chsql`AND device IN ${devicesSeen(q)}`})
                ARRAY JOIN if(z = '', [''], ['', z]) AS scope
                GROUP BY zone_id, device`;
}

export async function sightingKeys(ch: Ch, q: Parameters<typeof sightingKeysSql>[0]): Promise<ScopeKeys[]> {
  const rows = await chRows<ScopeKeys>(ch, sightingKeysSql(q));
  for (const r of rows) r.randomized_mac = Number(r.randomized_mac);
  return rows;
}

/** A run as of its venue period's checkpoint (migration 0013): what a recomputation from the checkpoint continues. */
export interface VisitState {
  zone_id: string;
  device: string;
  start_ms: number;
  last_ms: number;
  departed: number;
  sightings: number;
  randomized_mac: number;
}

/**
 * A venue period's checkpoint (0 when it has none) with its version, and the newest version of any
 * of its state rows: newer than the checkpoint's means a round wrote states but not the checkpoint.
 */
export function visitCheckpointSql(q: { operatorId: string; venueId: string; day: string }): ChSql {
  return chsql`SELECT toString(argMaxIf(cp_ms, version, device = '')) AS cp_ms, toString(maxIf(version, device = '')) AS cp_version,
                      toString(max(version)) AS newest
                 FROM derived_visit_state
                WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId}) AND day = toDate(${q.day})`;
}

export async function visitCheckpoint(
  ch: Ch,
  q: { operatorId: string; venueId: string; day: string },
): Promise<{ cpMs: number; version: number; newest: number }> {
  const [row] = await chRows<{ cp_ms: string; cp_version: string; newest: string }>(ch, visitCheckpointSql(q));
  return { cpMs: Number(row?.cp_ms ?? 0), version: Number(row?.cp_version ?? 0), newest: Number(row?.newest ?? 0) };
}

/** The stored runs (newest version per scope and device) of the devices seen in the marked range. */
export function visitStatesSql(q: VisitScope & { day: string }): ChSql {
  return chsql`SELECT zone_id, device, argMax(start_ms, version) AS start_ms, argMax(last_ms, version) AS last_ms,
                      argMax(departed, version) AS departed, argMax(sightings, version) AS sightings,
                      argMax(randomized_mac, version) AS randomized_mac
                 FROM derived_visit_state
                WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId}) AND day = toDate(${q.day})
                  AND device IN ${devicesSeen(q)}
                GROUP BY zone_id, device`;
}

export async function visitStates(ch: Ch, q: VisitScope & { day: string }): Promise<VisitState[]> {
  const rows = await chRows<VisitState>(ch, visitStatesSql(q));
  return rows.map((r) => ({
    zone_id: r.zone_id,
    device: r.device,
    start_ms: Number(r.start_ms),
    last_ms: Number(r.last_ms),
    departed: Number(r.departed),
    sightings: Number(r.sightings),
    randomized_mac: Number(r.randomized_mac),
  }));
}

export interface VisitStateRow extends VisitState {
  operator_id: string;
  venue_id: string;
  day: string;
  cp_ms: number;
  retention_days: number;
  version: number;
}

const STATE_COLUMNS = [
  'operator_id',
  'venue_id',
  'day',
  'zone_id',
  'device',
  'cp_ms',
  'start_ms',
  'last_ms',
  'departed',
  'sightings',
  'randomized_mac',
  'retention_days',
  'version',
];

/**
 * States and, last, their checkpoint (device ''): one insert, so the checkpoint lands only after
 * the rows it covers. TabSeparated: a round writes a row per device seen since the checkpoint.
 */
export const insertVisitStates = (ch: Ch, rows: VisitStateRow[]) =>
  insertTsv(
    ch,
    'derived_visit_state',
    STATE_COLUMNS,
    rows,
    (r) =>
      `${r.operator_id}\t${r.venue_id}\t${r.day}\t${tsvString(r.zone_id)}\t${tsvString(r.device)}\t${r.cp_ms}\t${r.start_ms}\t${r.last_ms}\t${r.departed}\t${r.sightings}\t${r.randomized_mac}\t${r.retention_days}\t${r.version}\n`,
  );

const visitsOf = (rows: DerivedVisit[]): DerivedVisit[] =>
  rows.map((r) => ({
    zone_id: r.zone_id,
    device: r.device,
    start_ms: Number(r.start_ms),
    end_ms: Number(r.end_ms),
    closes_ms: Number(r.closes_ms),
    sightings: Number(r.sightings),
    randomized_mac: Number(r.randomized_mac),
  }));

/** The live visits stored for a venue's period (newest version per key) of the devices seen in the marked range. */
export async function storedVisits(ch: Ch, q: VisitScope & { day: string }): Promise<DerivedVisit[]> {
  return visitsOf(
    await chRows<DerivedVisit>(
      ch,
      chsql`SELECT zone_id, device, start_ms, argMax(end_ms, version) AS end_ms, argMax(closes_ms, version) AS closes_ms,
                   argMax(sightings, version) AS sightings, argMax(randomized_mac, version) AS randomized_mac, argMax(live, version) AS alive
              FROM derived_visits
             WHERE ${operatorRows(q.operatorId)} AND venue_id = toUUID(${q.venueId}) AND day = toDate(${q.day})
               AND device IN ${devicesSeen(q)}
             GROUP BY zone_id, device, start_ms HAVING alive = 1`,
    ),
  );
}

export interface DerivedVisitRow extends DerivedVisit {
  operator_id: string;
  venue_id: string;
  day: string;
  retention_days: number;
  live: number;
  version: number;
}

const VISIT_COLUMNS = [
  'operator_id',
  'venue_id',
  'day',
  'zone_id',
  'device',
  'start_ms',
  'end_ms',
  'closes_ms',
  'sightings',
  'randomized_mac',
  'retention_days',
  'live',
  'version',
];

/** TabSeparated: a round writes a row per open visit whose last sighting moved. */
export const insertDerivedVisits = (ch: Ch, rows: DerivedVisitRow[]) =>
  insertTsv(
    ch,
    'derived_visits',
    VISIT_COLUMNS,
    rows,
    (r) =>
      `${r.operator_id}\t${r.venue_id}\t${r.day}\t${tsvString(r.zone_id)}\t${tsvString(r.device)}\t${r.start_ms}\t${r.end_ms}\t${r.closes_ms}\t${r.sightings}\t${r.randomized_mac}\t${r.retention_days}\t${r.live}\t${r.version}\n`,
  );
