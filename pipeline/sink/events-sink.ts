import type { Kafka } from 'kafkajs';
import { insertEvents, storedEventIds, storedOffsets, type EventRow } from '../../clickhouse/queries/events.js';
import { repairRollups, repairScopes, serverEngines } from '../../clickhouse/queries/rollup-repair.js';
import { decodeEventMessage } from '../../lib/events/wire.js';
import { describeError } from './dead-letter.js';
import type { Queryable } from '../../postgres/client.js';
import { advanceLastEventAt } from '../../postgres/queries/venues.js';
import { partitionKey, toRow } from './rows.js';
import { runSink, type RunningSink } from './run.js';
import { Sink, type SinkOptions, type SinkTarget } from './sink.js';
import { eventTime } from './target.js';

export type { SinkOptions, SinkStats } from './sink.js';
export type EventsSink = Sink<EventRow>;
export type RunningEventsSink = RunningSink<EventRow>;
export type { RunningEventsSink as RunningSink };

/**
 * The raw events: canonical events → `events` (and every telemetry rollup through its views).
 * Events whose id derives from a vendor event id (Square re-deliveries) are kept once; each write
 * moves the venues' `last_event_at` on.
 */
export function eventsTarget(db: Queryable): SinkTarget<EventRow> {
  return {
    name: 'events',
    decode(value) {
      return decodeEventMessage(value).map(({ event, error, raw }) =>
        event
          ? { raw, venueId: event.venueId, operatorId: event.operatorId, toRow: (origin, ctx) => toRow(event, origin, ctx) }
          : { raw, error: describeError(error) },
      );
    },
    insert: insertEvents,
    storedOffsets: (ch, q) => storedOffsets(ch, q, 'events'),
    partitionKey,
    // Random (version 4) ids never repeat; derived ones repeat when the vendor re-delivers.
    redeliveryId: (row) => (row.event_id[14] !== '4' ? row.event_id : undefined),
    storedIds: storedEventIds,
    repairViews: (ch, rows) => repairRollups(serverEngines(ch), repairScopes(rows)),
    async afterWrite(rows) {
      // Newest event per venue and connector type: the dashboard's connector lastEventAt reads it.
      const latest = new Map<string, { venueId: string; connectorType: string; at: number }>();
      // Rows come in runs of one venue and connector (a message each): the map is read once per run.
      let l: { venueId: string; connectorType: string; at: number } | undefined;
      for (const r of rows) {
        const at = eventTime(r);
        if (!l || l.venueId !== r.venue_id || l.connectorType !== r.connector_type) {
          const key = `${r.venue_id}|${r.connector_type}`;
          l = latest.get(key);
          if (!l) latest.set(key, (l = { venueId: r.venue_id, connectorType: r.connector_type, at }));
        }
        if (at > l.at) l.at = at;
      }
      await advanceLastEventAt(
        db,
        [...latest.values()].map((l) => ({ ...l, at: new Date(l.at) })),
      );
    },
  };
}

/** Runs the events sink as one member of `groupId`, over as many concurrent partitions as the topic has. */
export function runEventsSink(
  kafka: Kafka,
  opts: SinkOptions & { groupId: string; partitions: number; drainMs: number },
): Promise<RunningEventsSink> {
  return runSink(kafka, eventsTarget(opts.db), opts);
}
