import type { z } from 'zod';
import {
  asTopicEvent,
  checkCanonicalEvent,
  checkEnvelope,
  checkTopicElement,
  isRecord,
  type CanonicalEvent,
  type CheckedTopic,
  type EventEnvelope,
  type TopicEvent,
} from './canonical.js';
import type { EventType } from './vocabulary.js';

/**
 * The wire format of the contract's messages: canonical events in events-topic messages, and the
 * JSON codec every other message type (derived.ts, alarms.ts, processor state entries) shares.
 */

/*
 * An events-topic message holds a run of one ingest request's events for one venue, in order: an
 * envelope `{operatorId, venueId, connectorType, receivedAt, payloads: "lines", columns: {...}}` as
 * one line of JSON stating the fields the request's events share once, and the rest of each
 * canonical event but its payload as columns, one array per field (`id`, `zoneId`, `type`, `ts`,
 * `device`, `randomizedMac`, `metrics`), the events' values at the same index; then, after a line
 * break each, the events' payloads as JSON, in the same order. Columns, not an object per event:
 * parsing arrays of plain values builds no object and reads no key per event, about half the cost
 * of the same events as objects, and a third fewer envelope bytes (benchmarks/README.md, "The
 * envelope as columns"). Only the sink uses a payload, as the text it stores: apart, nobody parses
 * one (the edge and the processors read the envelope alone), and the sink does not stringify again
 * what it just parsed (benchmarks/README.md, "Payloads after the envelope"). JSON.stringify writes
 * no raw line break, so the lines split safely. Earlier forms stay readable while a topic holds
 * them: the envelope with `events` as an array of objects (with payload lines, or each element
 * with its `payload`), a JSON array of whole canonical events, or a single one as an object (the
 * sink dead-letters one event that way, so replaying a dead letter repeats nothing). Runs of about
 * 32 KB, not one event per message: Kafka clients, the sink and the processors pay their
 * per-message costs once per run. Not one message per request either: on V8 a string or buffer
 * over 128 KB is a large object, allocated and page-faulted on its own, which makes a whole
 * request several times dearer to handle than the same events in runs
 * (docs/events.md#the-canonical-event-kafka-topic-prefixeventsv1). Each message carries the
 * distinct event types it holds in the `event-types` header, so a consumer that wants a few types
 * skips the others unread.
 */
export const EVENT_TYPES_HEADER = 'event-types';
/** No message is larger, unless a single event is: well below V8's large-object size even as a two-byte string. */
export const MAX_EVENT_MESSAGE_BYTES = 64 * 1024;
const TARGET_EVENT_MESSAGE_BYTES = 32 * 1024;
/** Events in a request's first message (about 32 KB of typical events, 340 bytes each); later ones are sized from the bytes per event seen so far. */
const FIRST_RUN_EVENTS = 96;

export interface EventMessage {
  value: Buffer;
  headers: Record<string, string>;
}

const sameEnvelope = (a: CanonicalEvent, b: CanonicalEvent) =>
  a.operatorId === b.operatorId && a.venueId === b.venueId && a.connectorType === b.connectorType && a.receivedAt === b.receivedAt;

/** The envelope's `payloads` when the payloads follow it as lines. */
const PAYLOAD_LINES = 'lines';

/** The fields of an event an envelope holds as columns, in their order on the wire. */
const COLUMNS = ['id', 'zoneId', 'type', 'ts', 'device', 'randomizedMac', 'metrics'] as const;

/** A run of events sharing one envelope, as a message value: the envelope's line with the columns, then a payload's line per event. */
function envelopeValue(run: CanonicalEvent[]): Buffer {
  const { operatorId, venueId, connectorType, receivedAt } = run[0]!;
  // Filled by push, not preallocated: `new Array(n)` makes a holey array, which JSON.stringify walks
  // by a slow element look-up per value (benchmarks/README.md, "Packed columns").
  const id: string[] = [];
  const zoneId: Array<string | null> = [];
  const type: string[] = [];
  const ts: number[] = [];
  const device: Array<string | null> = [];
  const randomizedMac: boolean[] = [];
  const metrics: Array<CanonicalEvent['metrics']> = [];
  for (const e of run) {
    id.push(e.id);
    zoneId.push(e.zoneId);
    type.push(e.type);
    ts.push(e.ts);
    device.push(e.device);
    randomizedMac.push(e.randomizedMac);
    metrics.push(e.metrics);
  }
  const columns = { id, zoneId, type, ts, device, randomizedMac, metrics };
  let text = JSON.stringify({ operatorId, venueId, connectorType, receivedAt, payloads: PAYLOAD_LINES, columns });
  for (const e of run) text += `\n${JSON.stringify(e.payload)}`;
  return Buffer.from(text);
}

/** The messages for one venue's events, in order (a new message wherever the shared fields change). */
export function encodeEventMessages(events: CanonicalEvent[]): EventMessage[] {
  const out: EventMessage[] = [];
  let run = FIRST_RUN_EVENTS;
  for (let i = 0; i < events.length;) {
    let end = i + 1;
    while (end < events.length && end - i < run && sameEnvelope(events[i]!, events[end]!)) end++;
    const chunk = events.slice(i, end);
    const value = envelopeValue(chunk);
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
export type DecodedEvent = { event: TopicEvent; error?: undefined; raw: unknown } | { event?: undefined; error: string; raw: unknown };

interface ParsedMessage {
  /** How many events the message holds. */
  count: number;
  /** The i-th event as sent, its payload apart when `payloads` is set. */
  element(i: number): unknown;
  /** The i-th event's `type` as sent, read without building the element. */
  typeAt(i: number): unknown;
  /** The envelope's fields as sent (null for an array or a single event). */
  shared: Record<string, unknown> | null;
  /** The shared fields, checked; undefined when `shared` is null or not valid. */
  envelope?: EventEnvelope;
  /** Why the shared fields are not valid (every element fails with it). */
  envelopeError?: string;
  /** The elements' payloads as JSON text, when they follow the envelope as lines. */
  payloads?: string[];
}

const typeOf = (raw: unknown): unknown => (isRecord(raw) ? raw.type : undefined);

/** A message whose events are the given objects. */
function ofElements(elements: unknown[], rest: Omit<ParsedMessage, 'count' | 'element' | 'typeAt'>): ParsedMessage {
  return { count: elements.length, element: (i) => elements[i], typeAt: (i) => typeOf(elements[i]), ...rest };
}

/**
 * A message whose events are columns: each an array of one length. Otherwise every event fails
 * with the reason (as many events as the longest column or the payload lines say), its dead letter
 * holding what the columns hold at its place.
 */
function ofColumns(columns: Record<string, unknown>, rest: Omit<ParsedMessage, 'count' | 'element' | 'typeAt'>): ParsedMessage {
  const lengths = COLUMNS.map((k) => (Array.isArray(columns[k]) ? columns[k].length : -1));
  const count = Math.max(0, ...lengths, rest.payloads?.length ?? 0);
  // A column that is not an array reads as empty: its values are undefined, and the error below says why.
  const [id, zoneId, type, ts, device, randomizedMac, metrics] = COLUMNS.map((k): unknown[] =>
    Array.isArray(columns[k]) ? columns[k] : [],
  ) as [unknown[], unknown[], unknown[], unknown[], unknown[], unknown[], unknown[]];
  const element = (i: number) => ({
    id: id[i],
    zoneId: zoneId[i],
    type: type[i],
    ts: ts[i],
    device: device[i],
    randomizedMac: randomizedMac[i],
    metrics: metrics[i],
  });
  const bad = lengths.findIndex((l) => l !== count);
  const columnError = bad < 0 ? undefined : `columns.${COLUMNS[bad]}: must be an array of ${count} values, one per event`;
  const envelopeError = rest.envelopeError ?? columnError ?? lineCountError(rest.payloads, count);
  // Columns that are not arrays count no events: their one dead letter keeps the message from vanishing uncounted.
  return { ...rest, count: envelopeError === undefined ? count : Math.max(count, 1), element, typeAt: (i) => type[i], envelopeError };
}

/** The payload lines after the envelope's line (`lines`: where it ends, -1 when nothing follows). */
const payloadLines = (text: string, lines: number): string[] => (lines < 0 ? [] : text.slice(lines + 1).split('\n'));

/** Why the payload lines do not match the events, or undefined when they do (or none were meant to follow). */
const lineCountError = (payloads: string[] | undefined, count: number): string | undefined =>
  payloads && payloads.length !== count ? `payloads: ${payloads.length} lines for ${count} events` : undefined;

function parseMessage(value: Buffer | null): ParsedMessage {
  if (!value) throw new Error('empty message');
  const text = value.toString('utf8');
  const lines = text.indexOf('\n');
  const json: unknown = lines < 0 ? JSON.parse(text) : (envelopeLine(text.slice(0, lines)) ?? JSON.parse(text));
  if (Array.isArray(json)) return ofElements(json, { shared: null });
  if (isRecord(json) && json.payloads === PAYLOAD_LINES && isRecord(json.columns)) {
    const { envelope, error } = checkEnvelope(json);
    return ofColumns(json.columns, { shared: json, envelope, envelopeError: error, payloads: payloadLines(text, lines) });
  }
  if (isRecord(json) && Array.isArray(json.events)) {
    const { envelope, error } = checkEnvelope(json);
    if (json.payloads !== PAYLOAD_LINES) return ofElements(json.events, { shared: json, envelope, envelopeError: error });
    const payloads = payloadLines(text, lines);
    return ofElements(json.events, {
      shared: json,
      envelope,
      envelopeError: error ?? lineCountError(payloads, json.events.length),
      payloads,
    });
  }
  return ofElements([json], { shared: null });
}

/** The first line as an envelope whose payloads follow it; undefined when it is not one (JSON written over several lines). */
function envelopeLine(line: string): unknown {
  try {
    const json: unknown = JSON.parse(line);
    return isRecord(json) && json.payloads === PAYLOAD_LINES ? json : undefined;
  } catch {
    // Not an error here: the caller parses the whole value next, and that parse reports what is wrong.
    return undefined;
  }
}

/** An element checked against the contract, its envelope's fields taken from the message. */
function checkElement(m: ParsedMessage, raw: unknown, i: number): CheckedTopic {
  if (m.envelopeError !== undefined) return { error: m.envelopeError };
  if (m.payloads) return checkTopicElement(raw, m.envelope!, m.payloads[i]!);
  const { event, error } = checkCanonicalEvent(raw, m.envelope);
  return event ? { event: asTopicEvent(event) } : { error: error! };
}

/** An element as a whole event on its own (a dead letter): the envelope's fields and its payload added back. */
function wholeElement(m: ParsedMessage, raw: unknown, i: number): unknown {
  if (!m.shared || !isRecord(raw)) return raw;
  const { operatorId, venueId, connectorType, receivedAt } = m.shared;
  const line = m.payloads?.[i];
  return line === undefined
    ? { ...raw, operatorId, venueId, connectorType, receivedAt }
    : { ...raw, operatorId, venueId, connectorType, receivedAt, payload: parsedOr(line) };
}

/** A dead letter's payload: parsed, or the line as it came when it is not JSON (the letter's error names why it was refused). */
const parsedOr = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

/** Every event of a message, each checked against the contract. Throws when the envelope (or the whole value) is not JSON. */
export function decodeEventMessage(value: Buffer | null): DecodedEvent[] {
  const m = parseMessage(value);
  const out = new Array<DecodedEvent>(m.count);
  for (let i = 0; i < m.count; i++) {
    const raw = m.element(i);
    const { event, error } = checkElement(m, raw, i);
    // A valid event is its own dead letter, should its venue refuse it (JSON.stringify gives it whole).
    out[i] = event ? { event, raw: m.shared ? event : raw } : { error: error!, raw: wholeElement(m, raw, i) };
  }
  return out;
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
): { events: TopicEvent[]; invalid: number } {
  const events: TopicEvent[] = [];
  let invalid = 0;
  const declared = typesOf(message.headers);
  if (declared && !declared.some((t) => types.has(t as EventType))) return { events, invalid };
  const m = parseMessage(message.value);
  for (let i = 0; i < m.count; i++) {
    const type = m.typeAt(i);
    if (typeof type === 'string' && !types.has(type as EventType)) continue;
    const { event } = checkElement(m, m.element(i), i);
    if (event) events.push(event);
    else invalid++;
  }
  return { events, invalid };
}

export const encodeJson = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));
export function decodeJson<T>(schema: z.ZodType<T>, value: Buffer | null): T {
  if (!value) throw new Error('empty message');
  return schema.parse(JSON.parse(value.toString('utf8')));
}

/** A processor's state entry in its changelog; a null value (tombstone) deletes the entry. */
export const encodeStateEntry = (state: unknown): Buffer => encodeJson(state);
export function decodeStateEntry<T>(schema: z.ZodType<T>, value: Buffer | null): T | null {
  return value ? decodeJson(schema, value) : null;
}
