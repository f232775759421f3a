import { chRows, chsql, insertTsv, lineChunks, literal, raw, tsvString, tsvStringArray, type Ch, type ChSql } from '../client.js';

/** One row of the raw `events` table, every column present (18.16 ignores DEFAULTs for JSONEachRow). */
export interface EventRow {
  event_id: string;
  operator_id: string;
  venue_id: string;
  zone_id: string;
  connector_type: string;
  event_type: string;
  ts: number;
  local_day: string;
  ts_ms: number;
  received_at: number;
  device: string;
  randomized_mac: number;
  metric_names: string[];
  metric_values: number[];
  payload: string;
  retention_days: number;
  kafka_topic: string;
  kafka_partition: number;
  kafka_offset: string;
  /** The event's place in its message (a message holds a run of a request's events). */
  kafka_index: number;
}

export const EVENT_COLUMNS = [
  'event_id',
  'operator_id',
  'venue_id',
  'zone_id',
  'connector_type',
  'event_type',
  'ts',
  'local_day',
  'ts_ms',
  'received_at',
  'device',
  'randomized_mac',
  'metric_names',
  'metric_values',
  'payload',
  'retention_days',
  'kafka_topic',
  'kafka_partition',
  'kafka_offset',
  'kafka_index',
] as const satisfies ReadonlyArray<keyof EventRow>;

/** One raw event as a TabSeparated line, in EVENT_COLUMNS order. */
export function eventTsvLine(r: EventRow): string {
  return `${r.event_id}\t${r.operator_id}\t${r.venue_id}\t${tsvString(r.zone_id)}\t${tsvString(r.connector_type)}\t${tsvString(r.event_type)}\t${r.ts}\t${r.local_day}\t${r.ts_ms}\t${r.received_at}\t${tsvString(r.device)}\t${r.randomized_mac}\t${tsvStringArray(r.metric_names)}\t[${r.metric_values.join(',')}]\t${tsvString(r.payload)}\t${r.retention_days}\t${tsvString(r.kafka_topic)}\t${r.kafka_partition}\t${r.kafka_offset}\t${r.kafka_index}\n`;
}

/** The rows as TabSeparated body chunks, as `insertEvents` sends them (bench:sink-cpu times this). */
export const eventTsvChunks = (rows: readonly EventRow[]): Generator<Buffer> => lineChunks(rows, eventTsvLine);

/**
 * One INSERT of raw events (and, through the views, of every telemetry table), as TabSeparated: no
 * column names repeated per row, so fewer bytes and less CPU to build than JSONEachRow on the
 * sink's hottest path (benchmarks/README.md#raw-events-into-clickhouse-as-tabseparated-2026-11-27-issue-30).
 */
export async function insertEvents(ch: Ch, rows: readonly EventRow[]): Promise<void> {
  await insertTsv(ch, 'events', EVENT_COLUMNS, rows, eventTsvLine);
}

/** The offsets of one partition a look-up asks about, both ends included. */
export interface OffsetRange {
  partition: number;
  fromOffset: bigint;
  toOffset: bigint;
}

export interface StoredOffsetsQuery {
  topic: string;
  /** One range per partition: each partition's offsets are a sequence of their own. */
  ranges: OffsetRange[];
  /** Event-time bounds (epoch seconds) of the candidate rows: they prune partitions. */
  fromTs: number;
  toTs: number;
}

/** Tables written by a sink: every row carries its Kafka position and a `ts` event time. */
export type SunkTable = 'events' | 'occupancy_updates' | 'connector_health';

export function storedOffsetsSql(q: StoredOffsetsQuery, table: SunkTable = 'events'): ChSql {
  // Only raw events share a message with others; every derived row is its message's only one.
  const index = table === 'events' ? 'kafka_index' : '0';
  // Each partition's own range: one range over all of them (lowest to highest offset of any) would
  // also match, and return, every row the other partitions stored in between, which a sink
  // catching up on several partitions at different offsets had just written
  // (benchmarks/README.md, "Stored positions by partition").
  const ranges = q.ranges.map(
    (r) => chsql`(kafka_partition = ${r.partition} AND kafka_offset >= ${r.fromOffset} AND kafka_offset <= ${r.toOffset})`.text,
  );
  return chsql`SELECT kafka_partition AS partition, toString(kafka_offset) AS offset, ${raw(index)} AS index
                 FROM ${raw(table)}
                WHERE ts >= toDateTime(${q.fromTs}, 'UTC') AND ts <= toDateTime(${q.toTs}, 'UTC')
                  AND kafka_topic = ${q.topic}
                  AND (${raw(ranges.length > 0 ? ranges.join(' OR ') : '0')})`;
}

/**
 * Which of the candidate Kafka positions are already stored, as `partition:offset:index`. A row's
 * event time does not change on replay, so the candidates' time range finds every stored copy.
 */
export async function storedOffsets(ch: Ch, q: StoredOffsetsQuery, table: SunkTable = 'events'): Promise<Set<string>> {
  const found = await chRows<{ partition: number; offset: string; index: number }>(ch, storedOffsetsSql(q, table));
  return new Set(found.map((r) => `${r.partition}:${r.offset}:${r.index}`));
}

/** Which ids to look for, where: the venues (and their operators) and the event-time range of the candidates. */
export interface StoredIdsQuery {
  ids: string[];
  operatorIds: string[];
  venueIds: string[];
  fromTs: number;
  toTs: number;
}

const uuidList = (ids: string[]) =>
  raw(ids.length ? ids.map((id) => `toUUID(${literal(id)})`).join(', ') : "toUUID('00000000-0000-0000-0000-000000000000')");

/**
 * The candidate ids as one string split server-side: ClickHouse parses a list of thousands of
 * `toUUID('…')` constants slower than it runs the lookup itself, enough to keep a sink that has
 * fallen behind from catching up (docs/reliability.md#what-fuzzing-and-the-chaos-runner-found-and-what-changed).
 */
const uuidSet = (ids: string[]) =>
  ids.length
    ? chsql`SELECT toUUID(arrayJoin(splitByChar(',', ${ids.join(',')})))`
    : raw("SELECT toUUID('00000000-0000-0000-0000-000000000000')");

export function storedEventIdsSql(q: StoredIdsQuery): ChSql {
  // Operator, venue and time are the table's key prefix: only the candidates' venues and minutes
  // are read. The ids compare as UUIDs (a hash set), not as a string per row.
  return chsql`SELECT DISTINCT toString(event_id) AS id FROM events
                WHERE operator_id IN (${uuidList(q.operatorIds)}) AND venue_id IN (${uuidList(q.venueIds)})
                  AND ts >= toDateTime(${q.fromTs}, 'UTC') AND ts <= toDateTime(${q.toTs}, 'UTC')
                  AND event_id IN (${uuidSet(q.ids)})`;
}

/** Ids per lookup: 5,000 ids of 37 characters are 185 KB, inside ClickHouse's 256 KiB max_query_size. */
export const STORED_IDS_CHUNK = 5_000;

/** A candidate: an event id with where and when it belongs (a re-delivered event keeps its event time). */
export type StoredIdCandidate = Pick<EventRow, 'event_id' | 'operator_id' | 'venue_id' | 'ts'>;

/**
 * Which of the candidates' event ids are already stored. Looked up in chunks (a sink batch of
 * thousands of derived ids would otherwise exceed max_query_size and fail on every retry), each
 * chunk a run of one venue's candidates in time order, so it reads only that venue's minutes. Cut
 * any other way, every chunk would read the whole batch's venues and time range again, and a sink
 * that has fallen behind (larger batches) would pay more per event to check just when it must
 * catch up.
 */
export async function storedEventIds(ch: Ch, candidates: StoredIdCandidate[]): Promise<Set<string>> {
  const sorted = [...candidates].sort((a, b) => (a.venue_id < b.venue_id ? -1 : a.venue_id > b.venue_id ? 1 : a.ts - b.ts));
  const stored = new Set<string>();
  for (let i = 0; i < sorted.length; i += STORED_IDS_CHUNK) {
    const chunk = sorted.slice(i, i + STORED_IDS_CHUNK);
    const query: StoredIdsQuery = {
      ids: [...new Set(chunk.map((c) => c.event_id))],
      operatorIds: [...new Set(chunk.map((c) => c.operator_id))],
      venueIds: [...new Set(chunk.map((c) => c.venue_id))],
      fromTs: chunk[0]!.ts,
      toTs: chunk[0]!.ts,
    };
    for (const c of chunk) {
      if (c.ts < query.fromTs) query.fromTs = c.ts;
      if (c.ts > query.toTs) query.toTs = c.ts;
    }
    for (const r of await chRows<{ id: string }>(ch, storedEventIdsSql(query))) stored.add(r.id);
  }
  return stored;
}
