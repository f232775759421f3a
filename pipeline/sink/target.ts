import type { Producer } from 'kafkajs';
import type { Ch } from '../../clickhouse/client.js';
import type { StoredOffsetsQuery } from '../../clickhouse/queries/events.js';
import type { RollupRepair } from '../../clickhouse/queries/rollup-repair.js';
import type { Logger } from '../../lib/logger.js';
import type { Queryable } from '../../postgres/client.js';
import type { RecentIdsOptions } from './recent-ids.js';
import type { Origin } from './rows.js';
import type { VenueContext } from './venue-context.js';

/** What every sunk row carries: its venue, event time (seconds + ms) and retention class. */
export interface SinkRow {
  venue_id: string;
  ts: number;
  ts_ms: number;
  retention_days: number;
}

/** A row's event time in epoch ms. */
export const eventTime = (row: SinkRow): number => row.ts * 1000 + row.ts_ms;

/** A message element the target could decode: the venue and operator it claims, and its row once the venue is known. */
export interface Decoded<R> {
  /** The element as sent (dead-lettered alone if its venue refuses it). */
  raw: unknown;
  venueId: string;
  operatorId: string;
  toRow(origin: Origin, ctx: VenueContext): R;
}

/** An element that is not of the topic's type: dead-lettered on its own (`raw` as sent), the others of its message stored. */
export interface Undecodable {
  error: string;
  raw: unknown;
}

/** What differs between sinks: the message type, the table, and optional extras. */
export interface SinkTarget<R extends SinkRow> {
  /** For logs. */
  name: string;
  /** The message's elements in order (an events message holds a run of a request's events); throws when the whole message is unreadable (it is dead-lettered). */
  decode(value: Buffer | null): Array<Decoded<R> | Undecodable>;
  insert(ch: Ch, rows: R[]): Promise<void>;
  /** The positions already stored (`partition:offset:index`). */
  storedOffsets(ch: Ch, q: StoredOffsetsQuery): Promise<Set<string>>;
  /** The table's partition of a row (an insert touches at most 50). */
  partitionKey(row: R): string;
  /**
   * The id that recognises a re-delivery of the row (a vendor's event id), or undefined for a row
   * that cannot be one. With `storedIds`: re-deliveries of a stored (or earlier) row are skipped.
   */
  redeliveryId?(row: R): string | undefined;
  /** Which of these rows' `redeliveryId`s are already stored. */
  storedIds?(ch: Ch, rows: R[]): Promise<Set<string>>;
  /** After a successful insert, best effort. */
  afterWrite?(rows: R[]): Promise<void>;
  /** Adds what the table's views miss for these rows, all stored, some by an insert that failed (pipeline/sink/view-repair.ts). */
  repairViews?(ch: Ch, rows: R[]): Promise<RollupRepair>;
}

export interface SinkOptions {
  ch: Ch;
  db: Queryable;
  /** Sends dead letters (acks from all in-sync replicas). */
  producer: Producer;
  /** `events` is the topic consumed (for an output sink, its output topic); `deadLetter` receives poison messages. */
  topics: { events: string; deadLetter: string };
  log: Logger;
  batchRows: number;
  batchMs: number;
  retry?: { initialMs: number; maxMs: number };
  /** Fault injection for tests: runs after rows reached ClickHouse and before their offsets are committed. */
  afterInsert?: (rows: number) => Promise<void>;
  /** Observes every successful insert (metrics): the target's name, rows, seconds taken. */
  onInsert?: (target: string, rows: number, seconds: number) => void;
  /** The memory of recently stored ids (pipeline/sink/recent-ids.ts); tests shorten its waits. */
  recentIds?: RecentIdsOptions;
}

/** What the sink has done so far (for logs and tests). */
export interface SinkStats {
  inserts: number;
  rows: number;
  largestInsert: number;
  deadLettered: number;
  /** Rows found already stored (a replayed Kafka position) and skipped. */
  skipped: number;
  /** Re-delivered events (an event id already stored or earlier in the batch) dropped. */
  duplicates: number;
  /** Rows that could be re-deliveries: looked up in ClickHouse, or known new from the memory of recent ids. */
  idsLookedUp: number;
  idsKnownNew: number;
  commits: number;
  /** Repairs of views after failed inserts, the view rows they topped up, and suspect rows given up. */
  viewRepairs: number;
  viewRowsToppedUp: number;
  viewRepairsAbandoned: number;
}

export const newSinkStats = (): SinkStats => ({
  inserts: 0,
  rows: 0,
  largestInsert: 0,
  deadLettered: 0,
  skipped: 0,
  duplicates: 0,
  idsLookedUp: 0,
  idsKnownNew: 0,
  commits: 0,
  viewRepairs: 0,
  viewRowsToppedUp: 0,
  viewRepairsAbandoned: 0,
});
