import type { z } from 'zod';
import { checkCanonicalEvent, checkEnvelope, isRecord, type CanonicalEvent, type Checked, type EventEnvelope } from './canonical.js';
import type { EventType } from './vocabulary.js';

/**
 * The wire format of the contract's messages: canonical events in events-topic messages, and the
 * JSON codec every other message type (derived.ts, alarms.ts, processor state entries) shares.
 */

/*
 * An events-topic message holds a run of one ingest request's events for one venue, in order, as
 * JSON: an envelope `{operatorId, venueId, connectorType, receivedAt, events: [...]}` stating the
 * fields the request's events share once, each element of `events` holding the rest of a canonical
 * event. A JSON array of whole canonical events, or a single one as an object, is read too (the
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
  const events = run.map(({ id, zoneId, type, ts, device, randomizedMac, metrics, payload }) => ({
    id,
    zoneId,
    type,
    ts,
    device,
    randomizedMac,
    metrics,
    payload,
  }));
  return Buffer.from(JSON.stringify({ operatorId, venueId, connectorType, receivedAt, events }));
}

/** The messages for one venue's events, in order (a new message wherever the shared fields change). */
export function encodeEventMessages(events: CanonicalEvent[]): EventMessage[] {
  const out: EventMessage[] = [];
  let run = FIRST_RUN_EVENTS;
  for (let i = 0; i < events.length;) {
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
