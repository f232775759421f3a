import { z } from 'zod';

/**
 * The event contract shared by ingest, pipeline and edge: the canonical event every accepted
 * ingest event becomes, and the Kafka topics it travels on. Which connector sends which type, and
 * with which payload and metrics: docs/events.md.
 */

export const CONNECTOR_TYPES = ['meraki', 'aruba', 'unifi', 'mywifi', 'square', 'density', 'verkada'] as const;
export type ConnectorType = (typeof CONNECTOR_TYPES)[number];

export const EVENT_TYPES = [
  'device_seen',
  'device_left',
  'entry',
  'exit',
  'occupancy',
  'environment',
  'heartbeat',
  'transaction',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Telemetry keys a client may query or subscribe to (spec: Telemetry keys). */
export const TELEMETRY_KEYS = ['occupancy', 'temperature', 'co2', 'humidity', 'noise', 'entries', 'exits', 'devices'] as const;
export type TelemetryKey = (typeof TELEMETRY_KEYS)[number];

/** Numeric metrics an event may carry; `devices` is derived (distinct device pseudonyms), never sent. */
export const METRIC_NAMES = ['occupancy', 'temperature', 'co2', 'humidity', 'noise', 'entries', 'exits', 'amount'] as const;
export type MetricName = (typeof METRIC_NAMES)[number];

/**
 * Event times end before 2100-01-01: ClickHouse's DateTime ends in 2106 (later times would be
 * stored wrapped around), and telemetry queries share the bound.
 */
export const MAX_TS_MS = Date.UTC(2100, 0, 1);
const epochMs = z.number().int().nonnegative().lt(MAX_TS_MS);

export const canonicalEventSchema = z.object({
  /**
   * Assigned at ingest; unique; the sink's idempotency key. Random, except for events carrying a
   * vendor event id (Square `event_id`): derived from it, so a vendor's re-delivery keeps its id.
   */
  id: z.uuid(),
  operatorId: z.uuid(),
  venueId: z.uuid(),
  zoneId: z.uuid().nullable(),
  connectorType: z.enum(CONNECTOR_TYPES),
  type: z.enum(EVENT_TYPES),
  /** Event time, epoch milliseconds. */
  ts: epochMs,
  /** When ingest accepted it, epoch milliseconds. */
  receivedAt: epochMs,
  /** Keyed HMAC pseudonym (32 hex digits) of the device's MAC, when the event names a device; never the MAC. */
  device: z.string().regex(/^[0-9a-f]{32}$/, 'must be a device pseudonym (32 hex digits)').nullable(),
  /** True when the MAC had the locally-administered bit set (randomized MAC). */
  randomizedMac: z.boolean(),
  metrics: z.partialRecord(z.enum(METRIC_NAMES), z.number()),
  /** The connector's documented payload fields, raw MACs and other identifiers replaced by pseudonyms, zone fields removed. */
  payload: z.record(z.string(), z.unknown()),
});
export type CanonicalEvent = z.infer<typeof canonicalEventSchema>;

export interface Topics {
  /** Accepted events, keyed by venue id so one venue's events stay in order. */
  events: string;
  /** Messages the sink could not process, with the error in headers. */
  deadLetter: string;
}

export function topicNames(prefix: string): Topics {
  return { events: `${prefix}.events.v1`, deadLetter: `${prefix}.events.dlq.v1` };
}

export const encodeEvent = (event: CanonicalEvent): Buffer => Buffer.from(JSON.stringify(event));

/** Throws when the bytes are not a canonical event; the sink sends such messages to the dead-letter topic. */
export function decodeEvent(value: Buffer | null): CanonicalEvent {
  if (!value) throw new Error('empty message');
  return canonicalEventSchema.parse(JSON.parse(value.toString('utf8')));
}
