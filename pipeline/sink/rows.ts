import type { CanonicalEvent, TopicEvent } from '../../lib/events/canonical.js';
import type { EventRow } from '../../clickhouse/queries/events.js';
import { dayString, localDayNumber } from '../../domain/telemetry/calendar.js';

export interface Origin {
  topic: string;
  partition: number;
  offset: string;
  /** Place in the message (an events message holds a run of a request's events; other messages hold one). */
  index: number;
}

/** Where the event belongs: the venue's zone (for local days) and its operator's retention class. */
export interface Placement {
  timezone: string;
  retentionDays: number;
}

/** An event's raw row; one read from the topic keeps its payload's text as it travelled. */
export function toRow(e: TopicEvent | CanonicalEvent, origin: Origin, place: Placement): EventRow {
  const metrics = Object.entries(e.metrics) as Array<[string, number]>;
  return {
    event_id: e.id,
    operator_id: e.operatorId,
    venue_id: e.venueId,
    zone_id: e.zoneId ?? '',
    connector_type: e.connectorType,
    event_type: e.type,
    ts: Math.floor(e.ts / 1000),
    local_day: dayString(localDayNumber(e.ts, place.timezone)),
    ts_ms: e.ts % 1000,
    received_at: Math.floor(e.receivedAt / 1000),
    device: e.device ?? '',
    randomized_mac: e.randomizedMac ? 1 : 0,
    metric_names: metrics.map(([k]) => k),
    metric_values: metrics.map(([, v]) => v),
    payload: 'payloadJson' in e ? e.payloadJson : JSON.stringify(e.payload),
    retention_days: place.retentionDays,
    kafka_topic: origin.topic,
    kafka_partition: origin.partition,
    kafka_offset: origin.offset,
    kafka_index: origin.index,
  };
}

/** The raw table's partition: (retention class, UTC day). */
export const partitionKey = (r: EventRow): string => `${r.retention_days}-${Math.floor(r.ts / 86_400)}`;
