import { decodeEvent, type CanonicalEvent, type Topics } from '../../lib/events.js';

/** What the edge pushes for one message of a stream source, before the per-subscription key filter. */
export interface StreamItem {
  /** Checked against the connection's operator on every push (defence in depth). */
  operatorId: string;
  venueId: string;
  eventType: string;
  metrics: Partial<Record<string, number>>;
  /** ISO 8601, UTC. */
  time: string;
}

/**
 * A Kafka topic the edge tails and pushes to subscribers. Messages are decoded only through the
 * event contract module (lib/events.ts); `toItem` maps the decoded message to a push, or null for
 * a message that is not pushed.
 */
export interface StreamSource<T> {
  /** Short name: part of the consumer group id, and the label in /health. */
  name: string;
  topic: (topics: Topics) => string;
  decode: (value: Buffer | null) => T;
  toItem: (message: T) => StreamItem | null;
}

/** A source whose message type is erased, so sources of different types share one list. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyStreamSource = StreamSource<any>;

const acceptedEvents: StreamSource<CanonicalEvent> = {
  name: 'events',
  topic: (t) => t.events,
  decode: decodeEvent,
  toItem: (e) => ({ operatorId: e.operatorId, venueId: e.venueId, eventType: e.type, metrics: e.metrics, time: new Date(e.ts).toISOString() }),
};

/**
 * Every topic pushed over /ws. Occupancy updates (`eventType: "occupancy"`) and alarm events
 * (`eventType: "alarm"`) join as one entry each once their topics exist in lib/events.ts.
 */
export const STREAM_SOURCES: readonly AnyStreamSource[] = [acceptedEvents];
