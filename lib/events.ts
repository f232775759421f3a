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

const UUID = z.regexes.uuid();
const DEVICE = /^[0-9a-f]{32}$/;
const CONNECTOR_SET: ReadonlySet<string> = new Set(CONNECTOR_TYPES);
const EVENT_TYPE_SET: ReadonlySet<string> = new Set(EVENT_TYPES);
const METRIC_SET: ReadonlySet<string> = new Set(METRIC_NAMES);
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isEpochMs = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v < MAX_TS_MS;

/** The fields every event of one ingest request shares: an events message states them once, in its envelope. */
export interface EventEnvelope {
  operatorId: string;
  venueId: string;
  connectorType: ConnectorType;
  receivedAt: number;
}

type Checked = { event: CanonicalEvent; error?: undefined } | { event?: undefined; error: string };

/** Why a field is not a UUID, or undefined when it is. */
const uuidError = (e: Record<string, unknown>, f: string): string | undefined =>
  typeof e[f] === 'string' && UUID.test(e[f]) ? undefined : `${f}: must be a UUID`;
/** The checks of the shared fields, each where the contract's field order puts it (ids, then connector, then receivedAt). */
const idsError = (e: Record<string, unknown>) => uuidError(e, 'operatorId') ?? uuidError(e, 'venueId');
const connectorError = (e: Record<string, unknown>) =>
  typeof e.connectorType === 'string' && CONNECTOR_SET.has(e.connectorType) ? undefined : 'connectorType: must be a connector type';
const receivedAtError = (e: Record<string, unknown>) => (isEpochMs(e.receivedAt) ? undefined : 'receivedAt: must be epoch milliseconds before 2100');

/** An envelope's shared fields checked as `checkCanonicalEvent` checks them on an event. */
function checkEnvelope(e: Record<string, unknown>): { envelope: EventEnvelope; error?: undefined } | { envelope?: undefined; error: string } {
  const error = idsError(e) ?? connectorError(e) ?? receivedAtError(e);
  if (error !== undefined) return { error };
  return { envelope: { operatorId: e.operatorId as string, venueId: e.venueId as string, connectorType: e.connectorType as ConnectorType, receivedAt: e.receivedAt as number } };
}

/**
 * `canonicalEventSchema` checked by hand, for parsed JSON: every consumer checks every event it
 * reads, and this costs a fraction of a zod parse and copies only the top level (unknown keys
 * dropped, as zod does). test/pipeline/event-messages.test.ts holds the two equal on generated
 * input. The error names the first field at fault as `field: problem`. With an `envelope` (already
 * checked), the shared fields come from it and the element's own are ignored.
 */
export function checkCanonicalEvent(raw: unknown, envelope?: EventEnvelope): Checked {
  if (!isRecord(raw)) return { error: '(root): must be an object' };
  const e = raw;
  let error = uuidError(e, 'id') ?? (envelope ? undefined : idsError(e));
  if (error !== undefined) return { error };
  if (e.zoneId !== null && (typeof e.zoneId !== 'string' || !UUID.test(e.zoneId))) return { error: 'zoneId: must be a UUID or null' };
  if (!envelope && (error = connectorError(e)) !== undefined) return { error };
  if (typeof e.type !== 'string' || !EVENT_TYPE_SET.has(e.type)) return { error: 'type: must be an event type' };
  if (!isEpochMs(e.ts)) return { error: 'ts: must be epoch milliseconds before 2100' };
  if (!envelope && (error = receivedAtError(e)) !== undefined) return { error };
  if (e.device !== null && (typeof e.device !== 'string' || !DEVICE.test(e.device))) return { error: 'device: must be a device pseudonym (32 hex digits)' };
  if (typeof e.randomizedMac !== 'boolean') return { error: 'randomizedMac: must be a boolean' };
  if (!isRecord(e.metrics)) return { error: 'metrics: must be an object' };
  for (const k of Object.keys(e.metrics)) {
    const v = e.metrics[k];
    if (!METRIC_SET.has(k)) return { error: `metrics.${k}: not a metric name` };
    if (typeof v !== 'number' || !Number.isFinite(v)) return { error: `metrics.${k}: must be a number` };
  }
  if (!isRecord(e.payload)) return { error: 'payload: must be an object' };
  const shared = envelope ?? e;
  return {
    event: {
      id: e.id as string,
      operatorId: shared.operatorId as string,
      venueId: shared.venueId as string,
      zoneId: e.zoneId as string | null,
      connectorType: shared.connectorType as CanonicalEvent['connectorType'],
      type: e.type as CanonicalEvent['type'],
      ts: e.ts,
      receivedAt: shared.receivedAt as number,
      device: e.device as string | null,
      randomizedMac: e.randomizedMac,
      metrics: e.metrics as CanonicalEvent['metrics'],
      payload: e.payload,
    },
  };
}

export interface Topics {
  /** Accepted events, keyed by venue id so one venue's events stay in order. */
  events: string;
  /** Messages the sink could not process, with the error in headers. */
  deadLetter: string;
}

export function topicNames(prefix: string): Topics {
  return { events: `${prefix}.events.v1`, deadLetter: `${prefix}.events.dlq.v1` };
}

/*
 * An events-topic message holds a run of one ingest request's events for one venue, in order, as
 * JSON: an envelope `{operatorId, venueId, connectorType, receivedAt, events: [...]}` stating the
 * fields the request's events share once, each element of `events` holding the rest of a canonical
 * event. A JSON array of whole canonical events, or a single one as an object, is read too (the
 * sink dead-letters one event that way, so replaying a dead letter repeats nothing). Runs of about
 * 32 KB, not one event per message: Kafka clients, the sink and the processors pay their
 * per-message costs once per run. Not one message per request either: on V8 a string or buffer
 * over 128 KB is a large object, allocated and page-faulted on its own, and stringifying, decoding
 * and parsing a 500 KB request costs 3 to 20 times what the same events cost in 32 KB runs
 * (benchmarks/README.md). Each message carries the distinct event types it holds in the
 * `event-types` header, so a consumer that wants a few types skips the others unread.
 */
export const EVENT_TYPES_HEADER = 'event-types';
/** No message is larger, unless a single event is: well below V8's large-object size even as a two-byte string. */
export const MAX_EVENT_MESSAGE_BYTES = 64 * 1024;
const TARGET_EVENT_MESSAGE_BYTES = 32 * 1024;
/** Events in a request's first message; later ones are sized from the bytes per event seen so far. */
const FIRST_RUN_EVENTS = 64;

export interface EventMessage {
  value: Buffer;
  headers: Record<string, string>;
}

const sameEnvelope = (a: CanonicalEvent, b: CanonicalEvent) =>
  a.operatorId === b.operatorId && a.venueId === b.venueId && a.connectorType === b.connectorType && a.receivedAt === b.receivedAt;

/** A run of events sharing one envelope, as a message value. */
function envelopeJson(run: CanonicalEvent[]): Buffer {
  const { operatorId, venueId, connectorType, receivedAt } = run[0]!;
  const events = run.map(({ id, zoneId, type, ts, device, randomizedMac, metrics, payload }) => ({ id, zoneId, type, ts, device, randomizedMac, metrics, payload }));
  return Buffer.from(JSON.stringify({ operatorId, venueId, connectorType, receivedAt, events }));
}

/** The messages for one venue's events, in order (a new message wherever the shared fields change). */
export function encodeEventMessages(events: CanonicalEvent[]): EventMessage[] {
  const out: EventMessage[] = [];
  let run = FIRST_RUN_EVENTS;
  for (let i = 0; i < events.length; ) {
    let end = i + 1;
    while (end < events.length && end - i < run && sameEnvelope(events[i]!, events[end]!)) end++;
    const chunk = events.slice(i, end);
    const value = envelopeJson(chunk);
    // Resized runs shrink strictly (a run over the limit is more than twice the target), down to one event.
    run = Math.max(1, Math.floor((chunk.length * TARGET_EVENT_MESSAGE_BYTES) / value.length));
    if (value.length > MAX_EVENT_MESSAGE_BYTES && chunk.length > 1) continue;
    const types = new Set<string>();
    for (const e of chunk) types.add(e.type);
    out.push({ value, headers: { [EVENT_TYPES_HEADER]: [...types].join(',') } });
    i = end;
  }
  return out;
}

/** One event of a message: canonical, or why not (with the element as sent, for the dead-letter topic). */
export type DecodedEvent = { event: CanonicalEvent; error?: undefined; raw: unknown } | { event?: undefined; error: string; raw: unknown };

interface ParsedMessage {
  elements: unknown[];
  /** The envelope's fields as sent (null for an array or a single event). */
  shared: Record<string, unknown> | null;
  /** The shared fields, checked; undefined when `shared` is null or not valid. */
  envelope?: EventEnvelope;
  /** Why the shared fields are not valid (every element fails with it). */
  envelopeError?: string;
}

function parseMessage(value: Buffer | null): ParsedMessage {
  if (!value) throw new Error('empty message');
  const json: unknown = JSON.parse(value.toString('utf8'));
  if (Array.isArray(json)) return { elements: json, shared: null };
  if (isRecord(json) && Array.isArray(json.events)) {
    const { envelope, error } = checkEnvelope(json);
    return { elements: json.events, shared: json, envelope, envelopeError: error };
  }
  return { elements: [json], shared: null };
}

/** An element checked against the contract, its envelope's fields taken from the message. */
function checkElement(m: ParsedMessage, raw: unknown): Checked {
  if (m.envelopeError !== undefined) return { error: m.envelopeError };
  return checkCanonicalEvent(raw, m.envelope);
}

/** An element as a whole event on its own (a dead letter): the envelope's fields added back. */
function wholeElement(m: ParsedMessage, raw: unknown): unknown {
  if (!m.shared || !isRecord(raw)) return raw;
  const { operatorId, venueId, connectorType, receivedAt } = m.shared;
  return { ...raw, operatorId, venueId, connectorType, receivedAt };
}

/** Every event of a message, each checked against the contract. Throws when the bytes are not JSON. */
export function decodeEventMessage(value: Buffer | null): DecodedEvent[] {
  const m = parseMessage(value);
  return m.elements.map((raw): DecodedEvent => {
    const { event, error } = checkElement(m, raw);
    // A valid event is its own dead letter, should its venue refuse it.
    return event ? { event, raw: m.shared ? event : raw } : { error: error!, raw: wholeElement(m, raw) };
  });
}

/** The `event-types` header as a set, or null when the message has none (then every type may be in it). */
function typesOf(headers: Record<string, unknown> | undefined): string[] | null {
  const h = headers?.[EVENT_TYPES_HEADER];
  if (h === undefined || h === null) return null;
  return String(h).split(',');
}

/**
 * The events of a message whose type is one of `types`, validating only those; a message whose
 * header names none of them is not read at all. `invalid` counts the wanted-looking elements that
 * are not canonical (the events sink dead-letters them). Throws when the bytes are not JSON.
 */
export function decodeEventsOfTypes(
  message: { value: Buffer | null; headers?: Record<string, unknown> },
  types: ReadonlySet<EventType>,
): { events: CanonicalEvent[]; invalid: number } {
  const events: CanonicalEvent[] = [];
  let invalid = 0;
  const declared = typesOf(message.headers);
  if (declared && !declared.some((t) => types.has(t as EventType))) return { events, invalid };
  const m = parseMessage(message.value);
  for (const raw of m.elements) {
    const type = typeof raw === 'object' && raw !== null ? (raw as { type?: unknown }).type : undefined;
    if (typeof type === 'string' && !types.has(type as EventType)) continue;
    const { event } = checkElement(m, raw);
    if (event) events.push(event);
    else invalid++;
  }
  return { events, invalid };
}

/*
 * Derived streams: what the stream processors (pipeline/processors/) produce. Each is keyed by
 * venue id, so a venue's derived messages share a partition number with its events.
 */

const uuidOrNull = z.uuid().nullable();

/** A new occupancy figure for a venue (zoneId null) or one of its zones. */
export const occupancyUpdateSchema = z.object({
  operatorId: z.uuid(),
  venueId: z.uuid(),
  zoneId: uuidOrNull,
  /** People present after the change, never negative. */
  value: z.number().int().nonnegative(),
  capacity: z.number().nonnegative().nullable(),
  /** value / capacity × 100, null without a capacity (or a capacity of 0). */
  percent: z.number().nonnegative().nullable(),
  /** When the figure holds from, epoch ms (the event time of the change; the reset instant for resets). */
  ts: epochMs,
  /** `flow`: entries/exits; `count`: a connector's absolute count (re-baseline); `reset`: the daily reset. */
  reason: z.enum(['flow', 'count', 'reset']),
  /** People the clamp at 0 dropped in this change (exits counted while nobody was left). */
  clamped: z.number().int().nonnegative(),
});
export type OccupancyUpdate = z.infer<typeof occupancyUpdateSchema>;

/** `waiting`: created lately and never heard from yet (within the grace before it counts as offline, no alarm). */
export const CONNECTOR_HEALTH = ['healthy', 'degraded', 'offline', 'waiting'] as const;
export type ConnectorHealth = (typeof CONNECTOR_HEALTH)[number];

/** An integration's health changed (the alarm rules raise and clear alarms from these). */
export const connectorHealthChangeSchema = z.object({
  operatorId: z.uuid(),
  venueId: z.uuid(),
  integrationId: z.uuid(),
  connectorType: z.enum(CONNECTOR_TYPES),
  status: z.enum(CONNECTOR_HEALTH),
  previous: z.enum(CONNECTOR_HEALTH).nullable(),
  /** Newest event or heartbeat time of the integration, epoch ms; null when it never sent anything. */
  lastEventAt: epochMs.nullable(),
  /** Rejected / (accepted + rejected) over the health window, 0..1. */
  rejectionRate: z.number().min(0).max(1),
  reason: z.string().max(200),
  ts: epochMs,
});
export type ConnectorHealthChange = z.infer<typeof connectorHealthChangeSchema>;

/** One ingest request's outcome for a venue and connector (accepted and rejected counts): input of connector health. */
export const ingestReportSchema = z.object({
  operatorId: z.uuid(),
  venueId: z.uuid(),
  connectorType: z.enum(CONNECTOR_TYPES),
  accepted: z.number().int().nonnegative(),
  rejected: z.number().int().nonnegative(),
  ts: epochMs,
  /**
   * Set when the events came through one of the service's own vendor links (a webhook receiver or
   * a poller) rather than `/ingest`: that integration's delivery outcome, so connector health can
   * name a broken link (a refused signature, a failing poll) before the silence does.
   */
  source: z
    .object({
      integrationId: z.uuid(),
      link: z.enum(['webhook', 'poll']),
      /** Whether the delivery was taken (signature good, body read) or the poll answered. */
      ok: z.boolean(),
      /** What went wrong, in words a person can act on; never a secret or a raw identifier. */
      error: z.string().max(300).optional(),
    })
    .optional(),
});
export type IngestReport = z.infer<typeof ingestReportSchema>;
export type SourceOutcome = NonNullable<IngestReport['source']>;

export interface DerivedTopics {
  occupancy: string;
  connectorHealth: string;
  /** Ingest outcomes per request (keyed by venue, partitioned like the events topic). */
  ingestReports: string;
}

export function derivedTopicNames(prefix: string): DerivedTopics {
  return {
    occupancy: `${prefix}.occupancy.v1`,
    connectorHealth: `${prefix}.connector-health.v1`,
    ingestReports: `${prefix}.ingest-reports.v1`,
  };
}

/** A processor's compacted state topic: the state of input partition p lives in its partition p. */
export const changelogTopicName = (prefix: string, processor: string): string => `${prefix}.proc.${processor}.changelog.v1`;

const encodeJson = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));
function decodeJson<T>(schema: z.ZodType<T>, value: Buffer | null): T {
  if (!value) throw new Error('empty message');
  return schema.parse(JSON.parse(value.toString('utf8')));
}

export const encodeOccupancyUpdate = (u: OccupancyUpdate): Buffer => encodeJson(u);
export const decodeOccupancyUpdate = (value: Buffer | null): OccupancyUpdate => decodeJson(occupancyUpdateSchema, value);
export const encodeConnectorHealthChange = (c: ConnectorHealthChange): Buffer => encodeJson(c);
export const decodeConnectorHealthChange = (value: Buffer | null): ConnectorHealthChange => decodeJson(connectorHealthChangeSchema, value);
export const encodeIngestReport = (r: IngestReport): Buffer => encodeJson(r);
export const decodeIngestReport = (value: Buffer | null): IngestReport => decodeJson(ingestReportSchema, value);

/** A processor's state entry in its changelog; a null value (tombstone) deletes the entry. */
export const encodeStateEntry = (state: unknown): Buffer => encodeJson(state);
export function decodeStateEntry<T>(schema: z.ZodType<T>, value: Buffer | null): T | null {
  return value ? decodeJson(schema, value) : null;
}

/*
 * Alarms (docs/alarms.md): every change of an alarm (created by a rule, severity changed by a
 * rule, acknowledged by an operator, cleared by a rule or an operator) is one AlarmEvent on the
 * alarms topic, keyed by venue id. Delivery is at least once: `id` identifies an event, and
 * `alarm.updatedAt` orders the states of one alarm.
 */

export const ALARM_SEVERITIES = ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING'] as const;
export type AlarmSeverity = (typeof ALARM_SEVERITIES)[number];
export const ALARM_STATUSES = ['ACTIVE_UNACK', 'ACTIVE_ACK', 'CLEARED_UNACK', 'CLEARED_ACK'] as const;
export type AlarmStatus = (typeof ALARM_STATUSES)[number];
export const ALARM_EVENT_KINDS = ['created', 'severity_changed', 'acknowledged', 'cleared'] as const;
export type AlarmEventKind = (typeof ALARM_EVENT_KINDS)[number];

const isoTime = z.iso.datetime();

/** The alarm as the API shows it (spec: Alarm), plus integrationId (connector alarms have no zone) and updatedAt. */
export const alarmSchema = z.object({
  id: z.uuid(),
  venueId: z.uuid(),
  zoneId: uuidOrNull,
  integrationId: uuidOrNull,
  type: z.string(),
  severity: z.enum(ALARM_SEVERITIES),
  status: z.enum(ALARM_STATUSES),
  message: z.string(),
  details: z.record(z.string(), z.unknown()),
  createdAt: isoTime,
  updatedAt: isoTime,
  acknowledgedAt: isoTime.nullable(),
  clearedAt: isoTime.nullable(),
});
export type AlarmView = z.infer<typeof alarmSchema>;

export const alarmEventSchema = z.object({
  id: z.uuid(),
  kind: z.enum(ALARM_EVENT_KINDS),
  /** `rule`: the alarm rules; `operator`: an API call (ack, clear). */
  cause: z.enum(['rule', 'operator']),
  operatorId: z.uuid(),
  venueId: z.uuid(),
  /** The severity before a `severity_changed`, else null. */
  previousSeverity: z.enum(ALARM_SEVERITIES).nullable(),
  /** When the change was made, epoch ms. */
  ts: epochMs,
  /** The alarm after the change. */
  alarm: alarmSchema,
});
export type AlarmEvent = z.infer<typeof alarmEventSchema>;

export const alarmTopicName = (prefix: string): string => `${prefix}.alarms.v1`;

export const encodeAlarmEvent = (e: AlarmEvent): Buffer => encodeJson(e);
export const decodeAlarmEvent = (value: Buffer | null): AlarmEvent => decodeJson(alarmEventSchema, value);
