import { alarmTopicName, derivedTopicNames, topicNames } from '../../lib/topology.js';
import { decodeAlarmEvent, type AlarmEvent } from '../../lib/events/alarms.js';
import { decodeEventMessage, type DecodedEvent } from '../../lib/events/wire.js';
import { decodeOccupancyUpdate, type OccupancyUpdate } from '../../lib/events/derived.js';

/** What the edge pushes for one message of a stream source, before the per-subscription key filter. */
export interface StreamItem {
  /** Checked against the connection's operator on every push (defence in depth). */
  operatorId: string;
  venueId: string;
  /** Present on computed occupancy updates only: the zone, or null for the whole venue. */
  zoneId?: string | null;
  eventType: string;
  metrics: Partial<Record<string, number>>;
  /** Pushed to every subscriber of the venue whatever its keys (alarms), with this member added to `data`. */
  alarm?: Record<string, unknown>;
  /** ISO 8601, UTC. */
  time: string;
}

/**
 * A Kafka topic the edge tails and pushes to subscribers. Messages are decoded only through the
 * event contract modules (lib/events/); `toItems` maps the decoded message to its pushes (an
 * events message holds a run of a request's events; none for a message that is not pushed).
 */
export interface StreamSource<T> {
  /** Short name: part of the consumer group id, and the label in /health. */
  name: string;
  /** The topic, from the deployment's topic prefix. */
  topic: (prefix: string) => string;
  decode: (value: Buffer | null) => T;
  toItems: (message: T) => StreamItem[];
}

/** A source whose message type is erased, so sources of different types share one list. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyStreamSource = StreamSource<any>;

/** An element that is not a canonical event is not pushed (the events sink dead-letters it). */
const acceptedEvents: StreamSource<DecodedEvent[]> = {
  name: 'events',
  topic: (prefix) => topicNames(prefix).events,
  decode: decodeEventMessage,
  toItems: (decoded) =>
    decoded.flatMap(({ event: e }) =>
      e
        ? [{ operatorId: e.operatorId, venueId: e.venueId, eventType: e.type, metrics: e.metrics, time: new Date(e.ts).toISOString() }]
        : [],
    ),
};

/**
 * The live occupancy the service computes (docs/processors.md#occupancy): `eventType`
 * "occupancy" with a `zoneId` member (null for the whole venue). A connector's own count arrives
 * as its ingested event, also typed "occupancy" but without `zoneId`.
 */
const occupancyUpdates: StreamSource<OccupancyUpdate> = {
  name: 'occupancy',
  topic: (prefix) => derivedTopicNames(prefix).occupancy,
  decode: decodeOccupancyUpdate,
  toItems: (u) => [
    {
      operatorId: u.operatorId,
      venueId: u.venueId,
      zoneId: u.zoneId,
      eventType: 'occupancy',
      metrics: { occupancy: u.value },
      time: new Date(u.ts).toISOString(),
    },
  ],
};

/**
 * Alarm events (docs/alarms.md): `eventType` "alarm", empty `metrics`, and an `alarm` member with
 * the alarm after the change and what changed (`kind`: created, severity_changed, acknowledged,
 * cleared). Every subscriber of the venue gets them, whatever keys it asked for.
 */
const alarmEvents: StreamSource<AlarmEvent> = {
  name: 'alarms',
  topic: (prefix) => alarmTopicName(prefix),
  decode: decodeAlarmEvent,
  toItems: (e) => [
    {
      operatorId: e.operatorId,
      venueId: e.venueId,
      eventType: 'alarm',
      metrics: {},
      alarm: { ...e.alarm, kind: e.kind, previousSeverity: e.previousSeverity },
      time: new Date(e.ts).toISOString(),
    },
  ],
};

/** Every topic pushed over /ws. */
export const STREAM_SOURCES: readonly AnyStreamSource[] = [acceptedEvents, occupancyUpdates, alarmEvents];
