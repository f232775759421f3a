import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { decodeAlarmEvent, encodeAlarmEvent, type AlarmEvent } from '../../../lib/events/alarms.js';
import {
  decodeConnectorHealthChange,
  decodeIngestReport,
  decodeOccupancyUpdate,
  encodeConnectorHealthChange,
  encodeIngestReport,
  encodeOccupancyUpdate,
  type ConnectorHealthChange,
  type IngestReport,
  type OccupancyUpdate,
} from '../../../lib/events/derived.js';
import {
  decodeEventMessage,
  decodeEventsOfTypes,
  decodeStateEntry,
  encodeEventMessages,
  encodeStateEntry,
  EVENT_TYPES_HEADER,
  MAX_EVENT_MESSAGE_BYTES,
} from '../../../lib/events/wire.js';
import { event, plain } from '../support/events.js';

const operatorId = randomUUID();
const venueId = randomUUID();
const TS = Date.UTC(2026, 10, 27, 9, 30);
const json = (v: unknown) => Buffer.from(JSON.stringify(v));

describe('events-topic messages: size limits', () => {
  it('carry an event larger than the limit alone and intact, between its neighbours', () => {
    const blob = 'z'.repeat(MAX_EVENT_MESSAGE_BYTES * 2);
    const events = [
      event({ operatorId, venueId, ts: TS }),
      event({ operatorId, venueId, ts: TS + 1, payload: { blob } }),
      event({ operatorId, venueId, ts: TS + 2 }),
    ];
    const messages = encodeEventMessages(events);
    expect(messages).toHaveLength(3);
    expect(messages[1]!.value.length).toBeGreaterThan(MAX_EVENT_MESSAGE_BYTES);
    expect(plain(decodeEventMessage(messages[1]!.value))).toEqual([{ event: events[1], raw: events[1] }]);
    expect(plain(messages.flatMap((m) => decodeEventMessage(m.value).map((d) => d.event)))).toEqual(events);
  });

  it('keep every message within the limit for multi-byte text too (the limit counts bytes, not characters)', () => {
    const events = Array.from({ length: 300 }, (_, i) => event({ operatorId, venueId, ts: TS + i, payload: { note: '😀'.repeat(200) } }));
    const messages = encodeEventMessages(events);
    expect(messages.length).toBeGreaterThan(1);
    for (const m of messages) expect(m.value.length).toBeLessThanOrEqual(MAX_EVENT_MESSAGE_BYTES);
    expect(messages.flatMap((m) => decodeEventMessage(m.value).map((d) => d.event!.toJSON().payload.note))).toEqual(
      events.map((e) => e.payload.note),
    );
  });

  it('make no message for no events', () => {
    expect(encodeEventMessages([])).toEqual([]);
  });
});

describe('events-topic messages: malformed input', () => {
  it('refuse a missing value and bytes that are not JSON', () => {
    expect(() => decodeEventMessage(null)).toThrow('empty message');
    expect(() => decodeEventMessage(Buffer.from('\u0000\u0001garbage'))).toThrow(SyntaxError);
    expect(() => decodeEventsOfTypes({ value: null }, new Set(['entry'] as const))).toThrow('empty message');
  });

  it('turn JSON that is not an event into one failed element with its reason, keeping what was sent', () => {
    for (const value of [42, 'text', null, {}]) {
      const [only, ...rest] = decodeEventMessage(json(value));
      expect(rest).toEqual([]);
      expect(only!.event).toBeUndefined();
      expect(only!.error).toEqual(expect.any(String));
      expect(only!.raw).toEqual(value);
    }
  });

  it('name the field at fault for a bad element, and decode the good ones of the same message', () => {
    const good = event({ operatorId, venueId, ts: TS, type: 'entry', metrics: { entries: 2 } });
    const decoded = decodeEventMessage(json([good, { ...good, id: 'not-a-uuid' }, { ...good, metrics: { entries: 'two' } }]));
    expect(plain(decoded[0])).toEqual({ event: good, raw: good });
    expect(decoded[1]!.error).toMatch(/^id: /);
    expect(decoded[2]!.error).toMatch(/^metrics/);
  });

  it('read a message without the event-types header in full (messages from before the header)', () => {
    const entry = event({ operatorId, venueId, ts: TS, receivedAt: TS + 5, type: 'entry' });
    const [message] = encodeEventMessages([entry, event({ operatorId, venueId, ts: TS + 1, receivedAt: TS + 5, type: 'environment' })]);
    expect(message!.headers[EVENT_TYPES_HEADER]).toBe('entry,environment');
    expect(plain(decodeEventsOfTypes({ value: message!.value }, new Set(['entry'] as const)))).toEqual({ events: [entry], invalid: 0 });
  });
});

const occupancy: OccupancyUpdate = {
  operatorId,
  venueId,
  zoneId: null,
  value: 12,
  capacity: 40,
  percent: 30,
  ts: TS,
  reason: 'flow',
  clamped: 0,
};
const health: ConnectorHealthChange = {
  operatorId,
  venueId,
  integrationId: randomUUID(),
  connectorType: 'meraki',
  status: 'degraded',
  previous: 'healthy',
  lastEventAt: TS - 60_000,
  rejectionRate: 0.25,
  reason: '25% of events rejected',
  ts: TS,
};
const report: IngestReport = {
  operatorId,
  venueId,
  connectorType: 'square',
  accepted: 10,
  rejected: 1,
  ts: TS,
  source: { integrationId: randomUUID(), link: 'webhook', ok: false, error: 'signature refused' },
};
const iso = new Date(TS).toISOString();
const alarm: AlarmEvent = {
  id: randomUUID(),
  kind: 'severity_changed',
  cause: 'rule',
  operatorId,
  venueId,
  previousSeverity: 'MINOR',
  ts: TS,
  alarm: {
    id: randomUUID(),
    venueId,
    zoneId: randomUUID(),
    integrationId: null,
    type: 'occupancy',
    severity: 'MAJOR',
    status: 'ACTIVE_UNACK',
    message: 'Occupancy at 95% of capacity',
    details: { percent: 95 },
    createdAt: iso,
    updatedAt: iso,
    acknowledgedAt: null,
    clearedAt: null,
  },
};

const CODECS = [
  ['occupancy update', occupancy, encodeOccupancyUpdate, decodeOccupancyUpdate],
  ['connector health change', health, encodeConnectorHealthChange, decodeConnectorHealthChange],
  ['ingest report', report, encodeIngestReport, decodeIngestReport],
  ['alarm event', alarm, encodeAlarmEvent, decodeAlarmEvent],
] as Array<[string, object, (v: never) => Buffer, (b: Buffer | null) => object]>;

describe('derived-stream codecs', () => {
  it.each(CODECS)('%s: decodes what it encodes', (_name, value, encode, decode) => {
    expect(decode(encode(value as never))).toEqual(value);
  });

  it.each(CODECS)('%s: refuses a missing value and bytes that are not JSON', (_name, _value, _encode, decode) => {
    expect(() => decode(null)).toThrow('empty message');
    expect(() => decode(Buffer.from('{"cut'))).toThrow(SyntaxError);
  });

  it.each(CODECS)(
    '%s: reads a message with a field it does not know (a newer producer), dropping the field',
    (_name, value, _encode, decode) => {
      expect(decode(json({ ...value, addedLater: 1 }))).toEqual(value);
    },
  );

  it('refuse values outside the contract, naming the field', () => {
    const issue = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return err instanceof z.ZodError ? err.issues.map((i) => i.path.join('.')) : err;
      }
      return 'accepted';
    };
    expect(issue(() => decodeOccupancyUpdate(json({ ...occupancy, value: -1 })))).toEqual(['value']);
    expect(issue(() => decodeOccupancyUpdate(json({ ...occupancy, reason: 'guess' })))).toEqual(['reason']);
    expect(issue(() => decodeOccupancyUpdate(json({ ...occupancy, venueId: 'v1' })))).toEqual(['venueId']);
    expect(issue(() => decodeConnectorHealthChange(json({ ...health, rejectionRate: 1.5 })))).toEqual(['rejectionRate']);
    expect(issue(() => decodeConnectorHealthChange(json({ ...health, connectorType: 'acme' })))).toEqual(['connectorType']);
    expect(issue(() => decodeIngestReport(json({ ...report, source: { ...report.source, link: 'email' } })))).toEqual(['source.link']);
    expect(issue(() => decodeAlarmEvent(json({ ...alarm, alarm: { ...alarm.alarm, createdAt: 'yesterday' } })))).toEqual([
      'alarm.createdAt',
    ]);
    const { ts: _ts, ...noTime } = occupancy;
    expect(issue(() => decodeOccupancyUpdate(json(noTime)))).toEqual(['ts']);
  });
});

describe('processor state entries', () => {
  const schema = z.object({ count: z.number().int() });

  it('decode what they encode, and a tombstone (null value) as no entry', () => {
    expect(decodeStateEntry(schema, encodeStateEntry({ count: 3 }))).toEqual({ count: 3 });
    expect(decodeStateEntry(schema, null)).toBeNull();
  });

  it('refuse an entry that does not match the state schema', () => {
    expect(() => decodeStateEntry(schema, json({ count: 'three' }))).toThrow(z.ZodError);
  });
});
