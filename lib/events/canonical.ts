import { z } from 'zod';
import { isLowerHex, isUuid } from '../ids.js';
import { CONNECTOR_TYPES, EVENT_TYPES, MAX_TS_MS, METRIC_NAMES, epochMs, type ConnectorType } from './vocabulary.js';

/**
 * The canonical event: what every accepted ingest event becomes, on the events topic (its wire
 * form: wire.ts; docs/events.md).
 */
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
  device: z
    .string()
    .regex(/^[0-9a-f]{32}$/, 'must be a device pseudonym (32 hex digits)')
    .nullable(),
  /** True when the MAC had the locally-administered bit set (randomized MAC). */
  randomizedMac: z.boolean(),
  metrics: z.partialRecord(z.enum(METRIC_NAMES), z.number()),
  /** The connector's documented payload fields, raw MACs and other identifiers replaced by pseudonyms, zone fields removed. */
  payload: z.record(z.string(), z.unknown()),
});
export type CanonicalEvent = z.infer<typeof canonicalEventSchema>;

const CONNECTOR_SET: ReadonlySet<string> = new Set(CONNECTOR_TYPES);
const EVENT_TYPE_SET: ReadonlySet<string> = new Set(EVENT_TYPES);
const METRIC_SET: ReadonlySet<string> = new Set(METRIC_NAMES);
export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isEpochMs = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v < MAX_TS_MS;

/** The fields every event of one ingest request shares: an events message states them once, in its envelope. */
export interface EventEnvelope {
  operatorId: string;
  venueId: string;
  connectorType: ConnectorType;
  receivedAt: number;
}

export type Checked = { event: CanonicalEvent; error?: undefined } | { event?: undefined; error: string };

/** Why a field is not a UUID, or undefined when it is. */
const uuidError = (e: Record<string, unknown>, f: string): string | undefined =>
  typeof e[f] === 'string' && isUuid(e[f]) ? undefined : `${f}: must be a UUID`;
/** The checks of the shared fields, each where the contract's field order puts it (ids, then connector, then receivedAt). */
const idsError = (e: Record<string, unknown>) => uuidError(e, 'operatorId') ?? uuidError(e, 'venueId');
const connectorError = (e: Record<string, unknown>) =>
  typeof e.connectorType === 'string' && CONNECTOR_SET.has(e.connectorType) ? undefined : 'connectorType: must be a connector type';
const receivedAtError = (e: Record<string, unknown>) =>
  isEpochMs(e.receivedAt) ? undefined : 'receivedAt: must be epoch milliseconds before 2100';

/** An envelope's shared fields checked as `checkCanonicalEvent` checks them on an event. */
export function checkEnvelope(
  e: Record<string, unknown>,
): { envelope: EventEnvelope; error?: undefined } | { envelope?: undefined; error: string } {
  const error = idsError(e) ?? connectorError(e) ?? receivedAtError(e);
  if (error !== undefined) return { error };
  return {
    envelope: {
      operatorId: e.operatorId as string,
      venueId: e.venueId as string,
      connectorType: e.connectorType as ConnectorType,
      receivedAt: e.receivedAt as number,
    },
  };
}

/** Why the event's own fields (all but the payload) break the contract, or undefined; with an `envelope`, its shared fields are not read. */
function fieldsError(e: Record<string, unknown>, envelope?: EventEnvelope): string | undefined {
  let error = uuidError(e, 'id') ?? (envelope ? undefined : idsError(e));
  if (error !== undefined) return error;
  if (e.zoneId !== null && (typeof e.zoneId !== 'string' || !isUuid(e.zoneId))) return 'zoneId: must be a UUID or null';
  if (!envelope && (error = connectorError(e)) !== undefined) return error;
  if (typeof e.type !== 'string' || !EVENT_TYPE_SET.has(e.type)) return 'type: must be an event type';
  if (!isEpochMs(e.ts)) return 'ts: must be epoch milliseconds before 2100';
  if (!envelope && (error = receivedAtError(e)) !== undefined) return error;
  if (e.device !== null && (typeof e.device !== 'string' || !isLowerHex(e.device, 32)))
    return 'device: must be a device pseudonym (32 hex digits)';
  if (typeof e.randomizedMac !== 'boolean') return 'randomizedMac: must be a boolean';
  if (!isRecord(e.metrics)) return 'metrics: must be an object';
  for (const k of Object.keys(e.metrics)) {
    const v = e.metrics[k];
    if (!METRIC_SET.has(k)) return `metrics.${k}: not a metric name`;
    if (typeof v !== 'number' || !Number.isFinite(v)) return `metrics.${k}: must be a number`;
  }
  return undefined;
}

/**
 * `canonicalEventSchema` checked by hand, for parsed JSON: every consumer checks every event it
 * reads, and this costs a fraction of a zod parse and copies only the top level (unknown keys
 * dropped, as zod does). test/unit/pipeline/event-messages.test.ts holds the two equal on generated
 * input. The error names the first field at fault as `field: problem`. With an `envelope` (already
 * checked), the shared fields come from it and the element's own are ignored.
 */
export function checkCanonicalEvent(raw: unknown, envelope?: EventEnvelope): Checked {
  if (!isRecord(raw)) return { error: '(root): must be an object' };
  const error = fieldsError(raw, envelope);
  if (error !== undefined) return { error };
  if (!isRecord(raw.payload)) return { error: 'payload: must be an object' };
  return { event: { ...eventFields(raw, envelope ?? raw), payload: raw.payload } };
}

const eventFields = (e: Record<string, unknown>, shared: Record<string, unknown> | EventEnvelope) => ({
  id: e.id as string,
  operatorId: shared.operatorId as string,
  venueId: shared.venueId as string,
  zoneId: e.zoneId as string | null,
  connectorType: shared.connectorType as CanonicalEvent['connectorType'],
  type: e.type as CanonicalEvent['type'],
  ts: e.ts as number,
  receivedAt: shared.receivedAt as number,
  device: e.device as string | null,
  randomizedMac: e.randomizedMac as boolean,
  metrics: e.metrics as CanonicalEvent['metrics'],
});

/**
 * A canonical event as a consumer of the events topic reads it: the payload as the JSON text it
 * travels as (lib/events/wire.ts), not parsed: the sink stores it as text and nobody else reads it.
 * `JSON.stringify` gives the canonical event, payload parsed (a dead letter, a log line).
 */
export class TopicEvent {
  constructor(
    readonly id: string,
    readonly operatorId: string,
    readonly venueId: string,
    readonly zoneId: string | null,
    readonly connectorType: CanonicalEvent['connectorType'],
    readonly type: CanonicalEvent['type'],
    readonly ts: number,
    readonly receivedAt: number,
    readonly device: string | null,
    readonly randomizedMac: boolean,
    readonly metrics: CanonicalEvent['metrics'],
    /** The payload object's JSON text. */
    readonly payloadJson: string,
  ) {}

  toJSON(): CanonicalEvent {
    const { payloadJson, ...fields } = this;
    return { ...fields, payload: JSON.parse(payloadJson) as CanonicalEvent['payload'] };
  }
}

/** A topic event from checked fields: the event's own from `e`, the shared ones from `shared`. */
const topicEvent = (e: Record<string, unknown> | CanonicalEvent, shared: EventEnvelope, payloadJson: string) =>
  new TopicEvent(
    e.id as string,
    shared.operatorId,
    shared.venueId,
    e.zoneId as string | null,
    shared.connectorType,
    e.type as CanonicalEvent['type'],
    e.ts as number,
    shared.receivedAt,
    e.device as string | null,
    e.randomizedMac as boolean,
    e.metrics as CanonicalEvent['metrics'],
    payloadJson,
  );

export type CheckedTopic = { event: TopicEvent; error?: undefined } | { event?: undefined; error: string };

/**
 * An element of an events message whose payload travels apart, as JSON text: its own fields
 * checked as `checkCanonicalEvent` checks them, the payload only for being an object's text (the
 * api wrote it with JSON.stringify; the sink stores it as it is and nobody parses it on the way).
 */
export function checkTopicElement(raw: unknown, envelope: EventEnvelope, payloadJson: string): CheckedTopic {
  if (!isRecord(raw)) return { error: '(root): must be an object' };
  const error = fieldsError(raw, envelope);
  if (error !== undefined) return { error };
  if (payloadJson.charCodeAt(0) !== 123 /* { */ || payloadJson.charCodeAt(payloadJson.length - 1) !== 125 /* } */)
    return { error: 'payload: must be an object' };
  return { event: topicEvent(raw, envelope, payloadJson) };
}

/** A checked canonical event as a topic consumer holds it (messages in the older form, dead letters replayed). */
export const asTopicEvent = (e: CanonicalEvent): TopicEvent => topicEvent(e, e, JSON.stringify(e.payload));
