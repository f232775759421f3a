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
 * envelope `{operatorId, venueId, connectorType, receivedAt, payloads: "lines", events: [...]}` as
 * one line of JSON stating the fields the request's events share once, each element of `events`
 * holding the rest of a canonical event but its payload; then, after a line break each, the
 * elements' payloads as JSON, in the same order. Only the sink uses a payload, as the text it
 * stores: apart, nobody parses one (the edge and the processors read the envelope alone), and the
 * sink does not stringify again what it just parsed (benchmarks/README.md, "Payloads after the
 * envelope"). JSON.stringify writes no raw line break, so the lines split safely. The envelope
 * without `payloads`, each element with its `payload` (messages written before), a JSON array of
 * whole canonical events, or a single one as an object, are read too (the sink dead-letters one
 * event that way, so replaying a dead letter repeats nothing). Runs of about 32 KB, not one event
 * per message: Kafka clients, the sink and the processors pay their per-message costs once per
 * run. Not one message per request either: on V8 a string or buffer over 128 KB is a large object,
 * allocated and page-faulted on its own, which makes a whole request several times dearer to
 * handle than the same events in runs (docs/events.md#the-canonical-event-kafka-topic-prefixeventsv1).
 * Each message carries the distinct event types it holds in the `event-types` header, so a consumer
 * that wants a few types skips the others unread.
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

/** The envelope's `payloads` when the payloads follow it as lines. */
const PAYLOAD_LINES = 'lines';

/** A run of events sharing one envelope, as a message value: the envelope's line, then a payload's line per event. */
function envelopeValue(run: CanonicalEvent[]): Buffer {
  const { operatorId, venueId, connectorType, receivedAt } = run[0]!;
  const events = run.map(({ id, zoneId, type, ts, device, randomizedMac, metrics }) => ({
    id,
    zoneId,
    type,
    ts,
    device,
    randomizedMac,
    metrics,
  }));
  let text = JSON.stringify({ operatorId, venueId, connectorType, receivedAt, payloads: PAYLOAD_LINES, events });
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
  elements: unknown[];
  /** The envelope's fields as sent (null for an array or a single event). */
  shared: Record<string, unknown> | null;
  /** The shared fields, checked; undefined when `shared` is null or not valid. */
  envelope?: EventEnvelope;
  /** Why the shared fields are not valid (every element fails with it). */
  envelopeError?: string;
  /** The elements' payloads as JSON text, when they follow the envelope as lines. */
  payloads?: string[];
}

function parseMessage(value: Buffer | null): ParsedMessage {
  if (!value) throw new Error('empty message');
  const text = value.toString('utf8');
  const lines = text.indexOf('\n');
  const json: unknown = lines < 0 ? JSON.parse(text) : (envelopeLine(text.slice(0, lines)) ?? JSON.parse(text));
  if (Array.isArray(json)) return { elements: json, shared: null };
  if (isRecord(json) && Array.isArray(json.events)) {
    const { envelope, error } = checkEnvelope(json);
    if (json.payloads !== PAYLOAD_LINES) return { elements: json.events, shared: json, envelope, envelopeError: error };
    const payloads = lines < 0 ? [] : text.slice(lines + 1).split('\n');
    const count =
      payloads.length === json.events.length ? undefined : `payloads: ${payloads.length} lines for ${json.events.length} events`;
    return { elements: json.events, shared: json, envelope, envelopeError: error ?? count, payloads };
  }
  return { elements: [json], shared: null };
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
  return m.elements.map((raw, i): DecodedEvent => {
    const { event, error } = checkElement(m, raw, i);
    // A valid event is its own dead letter, should its venue refuse it (JSON.stringify gives it whole).
    return event ? { event, raw: m.shared ? event : raw } : { error: error!, raw: wholeElement(m, raw, i) };
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
): { events: TopicEvent[]; invalid: number } {
  const events: TopicEvent[] = [];
  let invalid = 0;
  const declared = typesOf(message.headers);
  if (declared && !declared.some((t) => types.has(t as EventType))) return { events, invalid };
  const m = parseMessage(message.value);
  for (let i = 0; i < m.elements.length; i++) {
    const raw = m.elements[i];
    const type = typeof raw === 'object' && raw !== null ? (raw as { type?: unknown }).type : undefined;
    if (typeof type === 'string' && !types.has(type as EventType)) continue;
    const { event } = checkElement(m, raw, i);
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
