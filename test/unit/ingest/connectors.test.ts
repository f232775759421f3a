import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { checkEvents, toCanonical } from '../../../domain/ingest/ingest.js';
import { CONNECTORS } from '../../../domain/ingest/connectors/index.js';
import { checkCanonicalEvent } from '../../../lib/events/canonical.js';
import { HmacSha256Key } from '../../../lib/hmac-sha256.js';
import { CONNECTOR_TYPES, type ConnectorType } from '../../../lib/events/vocabulary.js';

/*
 * Vendor payloads as connectors send them to /ingest → canonical events (docs/events.md), without
 * engines: the per-event checks and the mapping ingest runs before publishing.
 */
const NOW = Date.parse('2026-11-27T10:00:00Z');
const TIMESTAMP = '2026-11-27T09:59:00Z';
const RETENTION = { days: 30, plan: 'Starter' };
const key = new HmacSha256Key(Buffer.alloc(32, 9));
const operatorId = randomUUID();
const venueId = randomUUID();

const check = (connector: ConnectorType, events: unknown[]) => checkEvents(events, connector, NOW, RETENTION);
/** The canonical events of accepted input; fails the test on any rejection. */
function canonical(connector: ConnectorType, events: unknown[], idempotencyKey?: string) {
  const { valid, errors } = check(connector, events);
  expect(errors).toEqual([]);
  return valid.map((v) => toCanonical(v, { key, operatorId, venueId, connectorType: connector, receivedAt: NOW, idempotencyKey }));
}
/** The reason given for one rejected event. */
function reason(connector: ConnectorType, e: unknown): string {
  const { valid, errors } = check(connector, [e]);
  expect(valid).toEqual([]);
  return errors[0]!.reason;
}

/** What each documented example means: its metrics and the zone slug it names. */
const MEANING: Record<ConnectorType, Record<string, { metrics: Record<string, number>; zone?: string }>> = {
  meraki: {
    device_seen: { metrics: {}, zone: 'lobby' },
    environment: { metrics: { temperature: 21.4, humidity: 38 }, zone: 'lobby' },
    heartbeat: { metrics: {} },
  },
  aruba: { device_seen: { metrics: {}, zone: 'lobby' }, heartbeat: { metrics: {} } },
  unifi: { device_seen: { metrics: {}, zone: 'bar' }, device_left: { metrics: {} }, heartbeat: { metrics: {} } },
  mywifi: { device_seen: { metrics: {} }, heartbeat: { metrics: {} } },
  square: { transaction: { metrics: { amount: 1250 }, zone: 'counter-1' }, heartbeat: { metrics: {} } },
  density: {
    entry: { metrics: { entries: 1, occupancy: 37 }, zone: 'main-entrance' },
    exit: { metrics: { exits: 1, occupancy: 36 }, zone: 'main-entrance' },
    occupancy: { metrics: { occupancy: 36 }, zone: 'hall' },
    heartbeat: { metrics: {} },
  },
  verkada: {
    entry: { metrics: { entries: 12 }, zone: 'main-entrance' },
    exit: { metrics: { exits: 9 }, zone: 'main-entrance' },
    occupancy: { metrics: { occupancy: 41 }, zone: 'hall' },
    environment: { metrics: { temperature: 22.8, humidity: 41, co2: 612, noise: 58.5 }, zone: 'hall' },
    heartbeat: { metrics: {} },
  },
};

describe('each vendor’s documented payloads', () => {
  it.each(CONNECTOR_TYPES)('%s: become canonical events with the metrics they mean', (connector) => {
    expect(Object.keys(CONNECTORS[connector]).sort()).toEqual(Object.keys(MEANING[connector]).sort());
    for (const [type, spec] of Object.entries(CONNECTORS[connector])) {
      const { valid } = check(connector, [{ type, timestamp: TIMESTAMP, payload: structuredClone(spec.example) }]);
      expect(valid, `${connector} ${type}`).toHaveLength(1);
      expect(valid[0]!.event.zone, `${connector} ${type} zone`).toEqual(
        MEANING[connector][type]!.zone ? { slug: MEANING[connector][type]!.zone } : undefined,
      );
      const [e] = canonical(connector, [{ type, timestamp: TIMESTAMP, payload: structuredClone(spec.example) }]);
      expect(checkCanonicalEvent(JSON.parse(JSON.stringify(e))).error, `${connector} ${type} is canonical`).toBeUndefined();
      expect(e).toMatchObject({ operatorId, venueId, connectorType: connector, type, ts: Date.parse(TIMESTAMP), receivedAt: NOW });
      expect(e!.metrics, `${connector} ${type} metrics`).toEqual(MEANING[connector][type]!.metrics);
      // The zone reference becomes the event's zone (resolved later); it is not left in the payload.
      expect(e!.payload).not.toHaveProperty('zone');
      expect(e!.payload).not.toHaveProperty('zone_id');
    }
  });

  it('replace a device’s MAC, in any spelling, by the same pseudonym, and keep the raw MAC nowhere', () => {
    const spellings = ['3C:22:FB:1A:2B:3C', '3c-22-fb-1a-2b-3c', '3c22.fb1a.2b3c', '3c22fb1a2b3c'];
    const events = canonical(
      'meraki',
      spellings.map((clientMac) => ({ type: 'device_seen', timestamp: TIMESTAMP, payload: { clientMac, rssi: 40 } })),
    );
    expect(new Set(events.map((e) => e.device)).size).toBe(1);
    expect(events[0]!.device).toMatch(/^[0-9a-f]{32}$/);
    expect(events[0]!.payload.clientMac).toBe(events[0]!.device);
    expect(events[0]!.randomizedMac).toBe(false);
    expect(JSON.stringify(events).toLowerCase()).not.toContain('3c22fb');
    expect(JSON.stringify(events).toLowerCase()).not.toContain('3c:22:fb');
  });

  it('flag a locally administered (randomized) MAC, and give another operator another pseudonym', () => {
    const [random] = canonical('aruba', [{ type: 'device_seen', timestamp: TIMESTAMP, payload: { sta_eth_mac: 'da:a1:19:0b:7c:2e' } }]);
    expect(random!.randomizedMac).toBe(true);
    const { valid } = check('aruba', [{ type: 'device_seen', timestamp: TIMESTAMP, payload: { sta_eth_mac: 'da:a1:19:0b:7c:2e' } }]);
    const other = toCanonical(valid[0]!, {
      key: new HmacSha256Key(Buffer.alloc(32, 1)),
      operatorId,
      venueId,
      connectorType: 'aruba',
      receivedAt: NOW,
    });
    expect(other.device).not.toBe(random!.device);
  });

  it('take Aruba’s anonymised feed: a hashed MAC instead of the MAC, exactly one of the two', () => {
    const hashed = 'A'.repeat(40);
    const [e] = canonical('aruba', [{ type: 'device_seen', timestamp: TIMESTAMP, payload: { hashed_sta_eth_mac: hashed } }]);
    expect(e!.device).toMatch(/^[0-9a-f]{32}$/);
    expect(e!.randomizedMac).toBe(false);
    expect(reason('aruba', { type: 'device_seen', timestamp: TIMESTAMP, payload: {} })).toBe(
      'payload.sta_eth_mac: give exactly one of sta_eth_mac or hashed_sta_eth_mac',
    );
    expect(
      reason('aruba', {
        type: 'device_seen',
        timestamp: TIMESTAMP,
        payload: { sta_eth_mac: 'da:a1:19:0b:7c:2e', hashed_sta_eth_mac: hashed },
      }),
    ).toBe('payload.sta_eth_mac: give exactly one of sta_eth_mac or hashed_sta_eth_mac');
  });

  it('count Square’s amount only for a completed payment, pseudonymise the customer, and keep the id across re-deliveries', () => {
    const example = CONNECTORS.square.transaction!.example;
    const pending = { type: 'transaction', timestamp: TIMESTAMP, payload: { ...structuredClone(example), status: 'PENDING' } };
    expect(canonical('square', [pending])[0]!.metrics).toEqual({});
    const first = canonical('square', [{ type: 'transaction', timestamp: TIMESTAMP, payload: structuredClone(example) }])[0]!;
    const again = canonical('square', [{ type: 'transaction', timestamp: TIMESTAMP, payload: structuredClone(example) }])[0]!;
    expect(again.id).toBe(first.id);
    expect(first.payload.customer_id).toMatch(/^[0-9a-f]{32}$/);
    expect(first.payload.customer_id).not.toBe(example.customer_id);
    // Within one request, a vendor id sent twice is a duplicate.
    const { errors } = check('square', [pending, pending]);
    expect(errors).toEqual([{ index: 1, reason: 'duplicate of event 0 (same vendor event id)' }]);
  });

  it('give events without an id of their own the same ids when a request is resent with its Idempotency-Key', () => {
    const events = [0, 1].map(() => ({ type: 'heartbeat', timestamp: TIMESTAMP, payload: {} }));
    const ids = (k?: string) => canonical('verkada', events, k).map((e) => e.id);
    expect(ids('retry-1')).toEqual(ids('retry-1'));
    expect(new Set(ids('retry-1')).size).toBe(2);
    expect(ids()).not.toEqual(ids());
  });

  it('drop payload fields the vendor documentation does not name', () => {
    const [e] = canonical('meraki', [
      { type: 'environment', timestamp: TIMESTAMP, payload: { temperature: 20, clientIp: '10.0.0.7', userId: 'u1' } },
    ]);
    expect(e!.payload).toEqual({ temperature: 20 });
  });
});

describe('bad input', () => {
  const ok = { type: 'heartbeat', timestamp: TIMESTAMP, payload: {} };

  it('is refused event by event with a reason, the good events of the batch accepted', () => {
    const { valid, errors } = check('meraki', [ok, 'not an event', ok, [ok]]);
    expect(valid.map((v) => v.index)).toEqual([0, 2]);
    expect(errors).toEqual([
      { index: 1, reason: 'event must be an object with type, timestamp and payload' },
      { index: 3, reason: 'event must be an object with type, timestamp and payload' },
    ]);
  });

  it('names the accepted types for an unknown or missing type', () => {
    expect(reason('density', { ...ok, type: 'device_seen' })).toBe(
      "unknown event type 'device_seen' for connector density (accepted: entry, exit, occupancy, heartbeat)",
    );
    expect(reason('square', { timestamp: TIMESTAMP, payload: {} })).toBe('type is required: one of transaction, heartbeat');
  });

  it('names a misspelt envelope field instead of ignoring it', () => {
    expect(reason('meraki', { type: 'heartbeat', timestmap: TIMESTAMP, payload: {} })).toContain(
      "unknown field 'timestmap': an event holds only type, timestamp, payload and event_id (connector fields go in payload)",
    );
  });

  it('explains what is wrong with a timestamp', () => {
    expect(reason('meraki', { ...ok, timestamp: undefined })).toMatch(/^timestamp is required: an ISO 8601 date-time with a time zone/);
    expect(reason('meraki', { ...ok, timestamp: NOW })).toMatch(/^timestamp must be ISO 8601 .*, not an epoch number$/);
    expect(reason('meraki', { ...ok, timestamp: '2026-11-27 09:59' })).toMatch(
      /^timestamp must be ISO 8601 with a date, a time and a time zone/,
    );
    expect(reason('meraki', { ...ok, timestamp: '2026-11-27T10:06:00Z' })).toBe('timestamp is more than 5 minutes in the future');
    expect(reason('meraki', { ...ok, timestamp: '2026-10-01T00:00:00Z' })).toBe(
      'timestamp is older than the 30-day retention of the Starter plan',
    );
  });

  it('names the payload field at fault, and never echoes a MAC it refused', () => {
    const seen = (payload: object) => reason('meraki', { type: 'device_seen', timestamp: TIMESTAMP, payload });
    expect(seen({})).toBe('payload.clientMac: required');
    expect(seen({ clientMac: '3c:22:fb:1a:2b:3c', rssi: 'strong' })).toBe('payload.rssi: expected number, received string');
    const bad = seen({ clientMac: '3c:22:fb:1a:2b:zz' });
    expect(bad).toBe('payload.clientMac: not a MAC address (12 hex digits, e.g. aa:bb:cc:dd:ee:ff)');
    expect(reason('meraki', { ...ok, payload: [] })).toBe('payload must be an object');
  });

  it('refuses payloads that contradict themselves or say nothing', () => {
    expect(reason('meraki', { type: 'environment', timestamp: TIMESTAMP, payload: { serial: 'Q3CA' } })).toBe(
      'payload: give at least one reading: temperature, co2, humidity, noise',
    );
    expect(reason('density', { type: 'entry', timestamp: TIMESTAMP, payload: { direction: -1 } })).toBe(
      'payload.direction: must be 1 for this event type',
    );
    expect(
      reason('verkada', { type: 'occupancy', timestamp: TIMESTAMP, payload: { occupancy: 3, zone: 'hall', zone_id: randomUUID() } }),
    ).toBe('payload.zone: give zone_id or zone, not both');
    expect(reason('verkada', { type: 'occupancy', timestamp: TIMESTAMP, payload: { occupancy: -3 } })).toMatch(
      /^payload\.occupancy: too small/,
    );
  });
});
