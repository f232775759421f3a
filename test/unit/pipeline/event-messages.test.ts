import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalEventSchema, checkCanonicalEvent, type CanonicalEvent } from '../../../lib/events/canonical.js';
import {
  decodeEventMessage,
  decodeEventsOfTypes,
  encodeEventMessages,
  EVENT_TYPES_HEADER,
  MAX_EVENT_MESSAGE_BYTES,
} from '../../../lib/events/wire.js';
import { MAX_TS_MS, METRIC_NAMES } from '../../../lib/events/vocabulary.js';
import { event, plain } from '../support/events.js';

const operatorId = randomUUID();
const venueId = randomUUID();
const at = (i: number, e: Partial<CanonicalEvent> = {}) =>
  event({ operatorId, venueId, ts: 1_700_000_000_000 + i, receivedAt: 1_700_000_100_000, ...e });

describe('events-topic messages (lib/events/wire.ts)', () => {
  it('hold a request’s events in order, split only past the size limit, each message naming its types', () => {
    const small = [
      at(0, { type: 'entry', metrics: { entries: 1 } }),
      at(1, { type: 'exit', metrics: { exits: 1 } }),
      at(2, { type: 'entry' }),
    ];
    const [one, ...rest] = encodeEventMessages(small);
    expect(rest).toEqual([]);
    expect(one!.headers[EVENT_TYPES_HEADER]).toBe('entry,exit');
    expect(plain(decodeEventMessage(one!.value).map((d) => d.event))).toEqual(small);

    // 1,000 events with 2 KB payloads (about 2.3 MB) and 1,000 typical ones (about 400 KB): every
    // message well below V8's large-object size (128 KB), none nearly empty, the order kept.
    for (const bytes of [2000, 100]) {
      const big = Array.from({ length: 1000 }, (_, i) =>
        at(i, { type: i % 2 ? 'device_seen' : 'environment', payload: { blob: 'x'.repeat(bytes) } }),
      );
      const messages = encodeEventMessages(big);
      for (const m of messages) expect(m.value.length).toBeLessThanOrEqual(MAX_EVENT_MESSAGE_BYTES);
      for (const m of messages.slice(0, -1)) expect(m.value.length).toBeGreaterThan(MAX_EVENT_MESSAGE_BYTES / 4);
      expect(messages.flatMap((m) => decodeEventMessage(m.value).map((d) => d.event!.id))).toEqual(big.map((e) => e.id));
    }
    // An event larger than the limit travels alone.
    const huge = [at(0), at(1, { payload: { blob: 'y'.repeat(MAX_EVENT_MESSAGE_BYTES) } }), at(2)];
    expect(encodeEventMessages(huge).map((m) => decodeEventMessage(m.value).length)).toEqual([1, 1, 1]);
  });

  it('let a consumer skip a message holding none of its types unread, and read a single event or an array alike', () => {
    const [sightings] = encodeEventMessages([at(0, { type: 'device_seen', device: 'a'.repeat(32) })]);
    const flows = new Set(['entry', 'exit', 'occupancy'] as const);
    // The header says no flows: the value is not even parsed.
    expect(decodeEventsOfTypes({ value: Buffer.from('not json'), headers: sightings!.headers }, flows)).toEqual({ events: [], invalid: 0 });
    const entry = at(1, { type: 'entry' });
    expect(plain(decodeEventsOfTypes({ value: Buffer.from(JSON.stringify(entry)) }, flows))).toEqual({ events: [entry], invalid: 0 });
    const mixed = Buffer.from(JSON.stringify([at(2, { type: 'environment' }), entry, { type: 'exit', ts: 'soon' }]));
    expect(plain(decodeEventsOfTypes({ value: mixed }, flows))).toEqual({ events: [entry], invalid: 1 });
    expect(() => decodeEventMessage(Buffer.from('{"truncated'))).toThrow();
  });

  it('state the fields a request’s events share once per message, and read every element with them', () => {
    const other = randomUUID();
    const events = [at(0), at(1, { zoneId: randomUUID() }), at(2, { venueId: other }), at(3, { venueId: other, receivedAt: 5 })];
    const messages = encodeEventMessages(events);
    // A new message wherever operator, venue, connector or receivedAt change.
    expect(plain(messages.map((m) => decodeEventMessage(m.value).map((d) => d.event)))).toEqual([
      [events[0], events[1]],
      [events[2]],
      [events[3]],
    ]);
    // The envelope's line, then each element's payload on a line of its own.
    const [envelopeLine, ...payloadLines] = messages[0]!.value.toString().split('\n');
    const sent = JSON.parse(envelopeLine!);
    expect(sent).toMatchObject({
      operatorId,
      venueId,
      connectorType: events[0]!.connectorType,
      receivedAt: events[0]!.receivedAt,
      payloads: 'lines',
    });
    // The rest of each event as columns, one array per field, the events' values at the same index.
    expect(sent.events).toBeUndefined();
    expect(sent.columns).toEqual({
      id: [events[0]!.id, events[1]!.id],
      zoneId: [null, events[1]!.zoneId],
      type: [events[0]!.type, events[1]!.type],
      ts: [events[0]!.ts, events[1]!.ts],
      device: [events[0]!.device, events[1]!.device],
      randomizedMac: [events[0]!.randomizedMac, events[1]!.randomizedMac],
      metrics: [events[0]!.metrics, events[1]!.metrics],
    });
    expect(payloadLines).toEqual([JSON.stringify(events[0]!.payload), JSON.stringify(events[1]!.payload)]);
    const withLines = (envelope: unknown, lines = payloadLines) => Buffer.from([JSON.stringify(envelope), ...lines].join('\n'));
    const columns = (changes: Record<string, unknown[]>) => ({ ...sent, columns: { ...sent.columns, ...changes } });

    // The envelope is checked once: a bad shared field fails every element with its reason.
    const bad = withLines({ ...sent, venueId: 'nope' });
    expect(decodeEventMessage(bad).map((d) => d.error)).toEqual(['venueId: must be a UUID', 'venueId: must be a UUID']);
    // So does a payload line too many or too few, and a payload that is not an object's text.
    expect(decodeEventMessage(withLines(sent, payloadLines.slice(1))).map((d) => d.error)).toEqual([
      'payloads: 1 lines for 2 events',
      'payloads: 1 lines for 2 events',
    ]);
    expect(decodeEventMessage(withLines(sent, ['[1]', payloadLines[1]!])).map((d) => d.error ?? 'ok')).toEqual([
      'payload: must be an object',
      'ok',
    ]);
    // Columns of different lengths fail every event, each dead letter holding what the columns hold at its place.
    const ragged = decodeEventMessage(withLines(columns({ ts: [events[0]!.ts] })));
    expect(ragged.map((d) => d.error)).toEqual([
      'columns.ts: must be an array of 2 values, one per event',
      'columns.ts: must be an array of 2 values, one per event',
    ]);
    expect(ragged[1]!.raw).toMatchObject({ id: events[1]!.id, ts: undefined, payload: events[1]!.payload, venueId });
    // A column that is not an array, without payload lines, still leaves a dead letter rather than nothing.
    expect(decodeEventMessage(Buffer.from(JSON.stringify({ ...sent, columns: { id: 'x' } }))).map((d) => d.error)).toEqual([
      'columns.id: must be an array of 0 values, one per event',
    ]);
    // A bad element fails alone; its dead letter is a whole event, its payload back in it, readable on its own.
    const mixed = withLines(columns({ ts: [events[0]!.ts, 'soon'] }));
    const [good, broken] = decodeEventMessage(mixed);
    expect(plain(good!.event)).toEqual(events[0]);
    expect(plain(good!.raw)).toEqual(events[0]);
    expect(broken!.error).toBe('ts: must be epoch milliseconds before 2100');
    const letter = decodeEventMessage(Buffer.from(JSON.stringify(broken!.raw)));
    expect(letter).toEqual([
      {
        error: 'ts: must be epoch milliseconds before 2100',
        raw: {
          id: events[1]!.id,
          zoneId: events[1]!.zoneId,
          type: events[1]!.type,
          device: events[1]!.device,
          randomizedMac: events[1]!.randomizedMac,
          metrics: events[1]!.metrics,
          payload: events[1]!.payload,
          ts: 'soon',
          operatorId,
          venueId,
          connectorType: events[0]!.connectorType,
          receivedAt: events[0]!.receivedAt,
        },
      },
    ]);
    // Columns other than the event's own are not read: they cannot override the envelope.
    const spoofed = withLines(columns({ operatorId: [other, other], venueId: [other, other] }));
    expect(plain(decodeEventMessage(spoofed).map((d) => d.event))).toEqual([events[0], events[1]]);
    expect(
      plain(decodeEventsOfTypes({ value: mixed }, new Set(['device_seen', 'entry', 'exit', 'occupancy', 'environment'] as const))),
    ).toEqual({
      events: [events[0]],
      invalid: 1,
    });
  });

  it('read messages in the forms before (elements as objects, payloads inside them or on lines), and JSON written over several lines', () => {
    const events = [at(0, { payload: { rssi: -60, ssid: 'Guest\nnet' } }), at(1, { type: 'entry', metrics: { entries: 1 } })];
    const before = { operatorId, venueId, connectorType: events[0]!.connectorType, receivedAt: events[0]!.receivedAt, events };
    const asSent = Buffer.from(JSON.stringify(before));
    expect(plain(decodeEventMessage(asSent).map((d) => d.event))).toEqual(events);
    expect(plain(decodeEventsOfTypes({ value: asSent }, new Set(['entry'] as const)).events)).toEqual([events[1]]);
    // The same with its payloads as they travel now: the sink stores the text it got, the same text.
    const [now] = encodeEventMessages(events);
    expect(decodeEventMessage(now!.value).map((d) => d.event!.payloadJson)).toEqual(
      decodeEventMessage(asSent).map((d) => d.event!.payloadJson),
    );
    // The form of 2026-11-28: an object per element, the payloads on lines after the envelope.
    const shared = { operatorId, venueId, connectorType: events[0]!.connectorType, receivedAt: events[0]!.receivedAt };
    const elements = events.map(({ id, zoneId, type, ts, device, randomizedMac, metrics }) => ({
      id,
      zoneId,
      type,
      ts,
      device,
      randomizedMac,
      metrics,
    }));
    const asRows = Buffer.from(
      [JSON.stringify({ ...shared, payloads: 'lines', events: elements }), ...events.map((e) => JSON.stringify(e.payload))].join('\n'),
    );
    expect(plain(decodeEventMessage(asRows).map((d) => d.event))).toEqual(events);
    expect(plain(decodeEventsOfTypes({ value: asRows }, new Set(['entry'] as const)).events)).toEqual([events[1]]);
    // Line breaks between JSON tokens are not payload lines.
    expect(plain(decodeEventMessage(Buffer.from(JSON.stringify(before, null, 2))).map((d) => d.event))).toEqual(events);
    expect(plain(decodeEventMessage(Buffer.from(JSON.stringify(events, null, 2))).map((d) => d.event))).toEqual(events);
  });

  it('check events by hand exactly as the contract’s zod schema does, on generated JSON', () => {
    const fields = [
      'id',
      'operatorId',
      'venueId',
      'zoneId',
      'connectorType',
      'type',
      'ts',
      'receivedAt',
      'device',
      'randomizedMac',
      'metrics',
      'payload',
      'extra',
    ];
    const edgy = fc.oneof(
      fc.jsonValue(),
      fc.constantFrom(
        randomUUID(),
        randomUUID().toUpperCase(),
        '00000000-0000-0000-0000-000000000000',
        'a'.repeat(32),
        'A'.repeat(32),
        'meraki',
        'heartbeat',
        'nope',
        '',
      ),
      fc.constantFrom(0, -1, 1.5, MAX_TS_MS - 1, MAX_TS_MS, 2 ** 53, Number.MAX_SAFE_INTEGER, true, false, null, [], {}),
      fc.dictionary(
        fc.constantFrom(...METRIC_NAMES, 'bogus', 'constructor', 'toString'),
        fc.oneof(fc.double(), fc.integer(), fc.string(), fc.constant(null)),
        { maxKeys: 4 },
      ),
    );
    const mutation = fc.array(fc.record({ field: fc.constantFrom(...fields), drop: fc.boolean(), value: edgy }), { maxLength: 3 });
    fc.assert(
      fc.property(mutation, (changes) => {
        const e: Record<string, unknown> = {
          ...at(1, {
            type: 'device_seen',
            device: 'b'.repeat(32),
            zoneId: randomUUID(),
            metrics: { occupancy: 3 },
            payload: { rssi: -60 },
          }),
        };
        for (const c of changes) {
          if (c.drop) delete e[c.field];
          else e[c.field] = c.value;
        }
        const raw: unknown = JSON.parse(JSON.stringify(e));
        const zod = canonicalEventSchema.safeParse(raw);
        const mine = checkCanonicalEvent(raw);
        expect(mine.event !== undefined, `${JSON.stringify(raw)}: zod ${zod.success ? 'accepts' : 'refuses'}`).toBe(zod.success);
        if (zod.success) expect(mine.event).toEqual(zod.data);
      }),
      { numRuns: 5000, seed: 20261123 },
    );
  });
});
