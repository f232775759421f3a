import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { repoPath } from '../../lib/paths.js';
import { CONNECTOR_TYPES, type ConnectorType } from '../../lib/events/vocabulary.js';
import { CONNECTORS } from '../../domain/ingest/connectors/index.js';
import { addZone, EventTap, ingest, isoAgo, type Published } from './support.js';

let api: RunningApi;
let tap: EventTap;
let op: TestOperator;
beforeAll(async () => {
  api = await startApi();
  tap = await EventTap.start(api.services.cfg);
  op = await newOperator(api, 'pro');
});
afterAll(async () => {
  await tap.stop();
  await api.close();
});

const ZONES = ['lobby', 'bar', 'counter-1', 'main-entrance', 'hall'];

/** A venue of `op` with the zones the documented examples name; returns its id and zone ids by slug. */
async function venueWithZones(key = op.key): Promise<{ id: string; zones: Record<string, string> }> {
  const venue = await newVenue(api, key);
  const zones: Record<string, string> = {};
  for (const slug of ZONES) zones[slug] = await addZone(api, key, venue.id, slug);
  return { id: venue.id, zones };
}

/** The pseudonym scheme as documented: HMAC-SHA256(HMAC-SHA256(PSEUDONYM_KEY, operator id), identifier), 128 bits hex. */
const expectedPseudonym = (operatorId: string, identifier: string) => {
  const key = createHmac('sha256', api.services.cfg.PSEUDONYM_KEY).update(operatorId).digest();
  return createHmac('sha256', key).update(identifier).digest('hex').slice(0, 32);
};

/** Every spelling of a MAC a vendor might use; none may appear in a published message. */
const spellings = (mac: string) => {
  const hex = mac.replace(/[^0-9a-f]/gi, '').toLowerCase();
  const pairs = hex.match(/../g)!;
  return [hex, pairs.join(':'), pairs.join('-'), hex.match(/..../g)!.join('.')].flatMap((s) => [s, s.toUpperCase()]);
};
const expectNoRawMac = (published: Published[], mac: string) => {
  for (const p of published) for (const s of spellings(mac)) expect(p.raw.includes(s), `raw MAC ${s} in a message`).toBe(false);
};

const EXPECTED: Record<ConnectorType, Record<string, { metrics: Record<string, number>; zone?: string; randomized?: boolean }>> = {
  meraki: {
    device_seen: { metrics: {}, zone: 'lobby', randomized: false },
    environment: { metrics: { temperature: 21.4, humidity: 38 }, zone: 'lobby' },
    heartbeat: { metrics: {} },
  },
  aruba: { device_seen: { metrics: {}, zone: 'lobby', randomized: true }, heartbeat: { metrics: {} } },
  unifi: {
    device_seen: { metrics: {}, zone: 'bar', randomized: false },
    device_left: { metrics: {}, randomized: false },
    heartbeat: { metrics: {} },
  },
  mywifi: { device_seen: { metrics: {}, randomized: false }, heartbeat: { metrics: {} } },
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

describe('each connector’s documented event types', () => {
  it('covers exactly the accepted types, and docs/events.md documents every one', () => {
    const docs = readFileSync(repoPath('docs/events.md'), 'utf8');
    for (const connector of CONNECTOR_TYPES) {
      expect(Object.keys(CONNECTORS[connector]).sort(), connector).toEqual(Object.keys(EXPECTED[connector]).sort());
      expect(docs).toContain(`## ${connector}`);
      for (const type of Object.keys(CONNECTORS[connector]))
        expect(docs, `${connector} ${type}`).toMatch(new RegExp(`### ${connector} · \`${type}\``));
    }
  });

  it.each(CONNECTOR_TYPES)('%s: the examples are accepted and published as canonical events', async (connector) => {
    const venue = await venueWithZones();
    const specs = Object.entries(CONNECTORS[connector]);
    const timestamp = isoAgo(90_000);
    const before = Date.now();
    const res = await ingest(api, op.key, {
      venue_id: venue.id,
      connector_type: connector,
      events: specs.map(([type, spec]) => ({ type, timestamp, payload: spec!.example })),
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toEqual({ accepted: specs.length, rejected: 0, errors: [] });

    const published = await tap.waitFor(venue.id, specs.length);
    for (const [type, spec] of specs) {
      const { event, key } = published.find((p) => p.event.type === type)!;
      const want = EXPECTED[connector][type]!;
      expect(key).toBe(venue.id);
      expect(event).toMatchObject({ operatorId: op.id, venueId: venue.id, connectorType: connector, type, ts: Date.parse(timestamp) });
      expect(event.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      expect(event.receivedAt).toBeGreaterThanOrEqual(before - 1000);
      expect(event.metrics, `${type} metrics`).toEqual(want.metrics);
      expect(event.zoneId, `${type} zone`).toBe(want.zone ? venue.zones[want.zone] : null);
      expect(event.payload).not.toHaveProperty('zone');
      expect(event.payload).not.toHaveProperty('zone_id');
      const example = spec!.example as Record<string, unknown>;
      const macField = ['clientMac', 'sta_eth_mac', 'mac'].find((f) => f in example);
      if (want.randomized !== undefined) {
        expect(event.device).toMatch(/^[0-9a-f]{32}$/);
        expect(event.randomizedMac).toBe(want.randomized);
        expect(event.payload[macField!]).toBe(event.device);
        expectNoRawMac(published, example[macField!] as string);
      } else {
        expect(event.device).toBeNull();
        expect(event.randomizedMac).toBe(false);
      }
    }
  });
});

describe('device pseudonyms', () => {
  it('are the same for one device whatever the MAC spelling or connector, flag randomized MACs, and never carry the MAC', async () => {
    const venue = await newVenue(api, op.key);
    const send = (connector: ConnectorType, payload: Record<string, unknown>) =>
      ingest(api, op.key, {
        venue_id: venue.id,
        connector_type: connector,
        events: [{ type: 'device_seen', timestamp: isoAgo(), payload }],
      });
    expect((await send('meraki', { clientMac: 'AA-BB-CC-11-22-33', rssi: 40 })).body.accepted).toBe(1);
    expect((await send('unifi', { mac: 'aabb.cc11.2233' })).body.accepted).toBe(1);
    expect((await send('aruba', { sta_eth_mac: 'aa:bb:cc:11:22:33' })).body.accepted).toBe(1);
    expect((await send('mywifi', { mac: 'AABBCC112233' })).body.accepted).toBe(1);
    expect((await send('meraki', { clientMac: '00:1A:2B:3C:4D:5E' })).body.accepted).toBe(1);

    const published = await tap.waitFor(venue.id, 5);
    const pseudonym = expectedPseudonym(op.id, 'aa:bb:cc:11:22:33');
    expect(published.slice(0, 4).map((p) => p.event.device)).toEqual([pseudonym, pseudonym, pseudonym, pseudonym]);
    expect(published.slice(0, 4).every((p) => p.event.randomizedMac)).toBe(true);
    expect(published[4]!.event.device).toBe(expectedPseudonym(op.id, '00:1a:2b:3c:4d:5e'));
    expect(published[4]!.event.randomizedMac).toBe(false);
    expectNoRawMac(published, 'aa:bb:cc:11:22:33');
    expectNoRawMac(published, '00:1a:2b:3c:4d:5e');
  });

  it('differ between operators for the same MAC', async () => {
    const other = await newOperator(api, 'pro');
    const mine = await newVenue(api, op.key);
    const theirs = await newVenue(api, other.key);
    const event = { type: 'device_seen', timestamp: isoAgo(), payload: { mac: '12:34:56:78:9a:bc' } };
    expect((await ingest(api, op.key, { venue_id: mine.id, connector_type: 'unifi', events: [event] })).body.accepted).toBe(1);
    expect((await ingest(api, other.key, { venue_id: theirs.id, connector_type: 'unifi', events: [event] })).body.accepted).toBe(1);
    const [a] = await tap.waitFor(mine.id, 1);
    const [b] = await tap.waitFor(theirs.id, 1);
    expect(a!.event.device).toBe(expectedPseudonym(op.id, '12:34:56:78:9a:bc'));
    expect(b!.event.device).toBe(expectedPseudonym(other.id, '12:34:56:78:9a:bc'));
    expect(a!.event.device).not.toBe(b!.event.device);
  });

  it('take Aruba’s already-hashed MAC as the identifier (no randomized flag possible)', async () => {
    const venue = await newVenue(api, op.key);
    const hashed = 'A94A8FE5CCB19BA61C4C0873D391E987982FBBD3';
    const res = await ingest(api, op.key, {
      venue_id: venue.id,
      connector_type: 'aruba',
      events: [
        { type: 'device_seen', timestamp: isoAgo(), payload: { hashed_sta_eth_mac: hashed, rssi: -70 } },
        { type: 'device_seen', timestamp: isoAgo(), payload: { hashed_sta_eth_mac: hashed, sta_eth_mac: 'aa:bb:cc:00:00:01' } },
        { type: 'device_seen', timestamp: isoAgo(), payload: { rssi: -70 } },
      ],
    });
    expect(res.body).toEqual({
      accepted: 1,
      rejected: 2,
      errors: [
        { index: 1, reason: 'payload.sta_eth_mac: give exactly one of sta_eth_mac or hashed_sta_eth_mac' },
        { index: 2, reason: 'payload.sta_eth_mac: give exactly one of sta_eth_mac or hashed_sta_eth_mac' },
      ],
    });
    const [p] = await tap.waitFor(venue.id, 1);
    expect(p!.event.device).toBe(expectedPseudonym(op.id, `hashed_sta_eth_mac:${hashed.toLowerCase()}`));
    expect(p!.event.payload.hashed_sta_eth_mac).toBe(p!.event.device);
    expect(p!.event.randomizedMac).toBe(false);
    expect(p!.raw.includes(hashed.toLowerCase())).toBe(false);
  });

  it('drop vendor fields that are not documented (nested observations, IPs, hostnames) and refuse malformed MACs', async () => {
    const venue = await newVenue(api, op.key);
    const res = await ingest(api, op.key, {
      venue_id: venue.id,
      connector_type: 'meraki',
      events: [
        {
          type: 'device_seen',
          timestamp: isoAgo(),
          payload: {
            clientMac: 'fe:dc:ba:98:76:54',
            ipv4: '/10.0.0.7',
            userId: 'alice@example.com',
            observations: [{ clientMac: 'fe:dc:ba:98:76:54', rssi: 40 }],
            latestRecord: { nearestApMac: 'fe:dc:ba:98:76:54' },
          },
        },
        { type: 'device_seen', timestamp: isoAgo(), payload: { clientMac: 'fe:dc:ba:98:76' } },
        { type: 'device_seen', timestamp: isoAgo(), payload: { clientMac: 42 } },
      ],
    });
    expect(res.body).toEqual({
      accepted: 1,
      rejected: 2,
      errors: [
        { index: 1, reason: 'payload.clientMac: not a MAC address (12 hex digits, e.g. aa:bb:cc:dd:ee:ff)' },
        { index: 2, reason: 'payload.clientMac: expected string, received number' },
      ],
    });
    const [p] = await tap.waitFor(venue.id, 1);
    expect(Object.keys(p!.event.payload)).toEqual(['clientMac']);
    expectNoRawMac([p!], 'fe:dc:ba:98:76:54');
    expect(p!.raw.includes('alice')).toBe(false);
  });
});

describe('zones named in a payload', () => {
  it('resolve by slug and by id to the venue’s active zones; other zones are rejected per event', async () => {
    const venue = await venueWithZones();
    const other = await venueWithZones();
    const gone = await addZone(api, op.key, venue.id, 'closed-wing');
    expect((await request(`${api.url}/api/venues/${venue.id}/zones/${gone}`, { key: op.key, method: 'DELETE' })).status).toBe(200);
    const crossing = (payload: Record<string, unknown>) => ({ type: 'entry', timestamp: isoAgo(), payload });
    const res = await ingest(api, op.key, {
      venue_id: venue.id,
      connector_type: 'verkada',
      events: [
        crossing({ zone: 'hall' }),
        crossing({ zone_id: venue.zones['bar'] }),
        crossing({ zone_id: other.zones['hall'] }),
        crossing({ zone: 'nowhere' }),
        crossing({ zone_id: gone }),
        crossing({ zone: 'closed-wing' }),
        crossing({ zone: 'hall', zone_id: venue.zones['hall'] }),
        crossing({ zone_id: 'hall' }),
        crossing({}),
      ],
    });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      accepted: 3,
      rejected: 6,
      errors: [
        { index: 2, reason: `payload.zone_id '${other.zones['hall']}' is not an active zone of this venue` },
        { index: 3, reason: `payload.zone 'nowhere' is not an active zone of this venue` },
        { index: 4, reason: `payload.zone_id '${gone}' is not an active zone of this venue` },
        { index: 5, reason: `payload.zone 'closed-wing' is not an active zone of this venue` },
        { index: 6, reason: 'payload.zone: give zone_id or zone, not both' },
        { index: 7, reason: 'payload.zone_id: must be a zone uuid' },
      ],
    });
    const published = await tap.waitFor(venue.id, 3);
    expect(published.map((p) => p.event.zoneId)).toEqual([venue.zones['hall'], venue.zones['bar'], null]);
    expect(published.map((p) => p.event.metrics)).toEqual([{ entries: 1 }, { entries: 1 }, { entries: 1 }]);
  });
});

describe('people counting', () => {
  it('checks Density’s direction against the type and Verkada’s count', async () => {
    const venue = await newVenue(api, op.key);
    const send = (connector: ConnectorType, events: unknown[]) =>
      ingest(api, op.key, { venue_id: venue.id, connector_type: connector, events });
    const density = await send('density', [
      { type: 'entry', timestamp: isoAgo(), payload: { direction: -1, count: 3 } },
      { type: 'exit', timestamp: isoAgo(), payload: { direction: -1, count: 0 } },
      { type: 'exit', timestamp: isoAgo(), payload: {} },
    ]);
    expect(density.body).toEqual({
      accepted: 2,
      rejected: 1,
      errors: [{ index: 0, reason: 'payload.direction: must be 1 for this event type' }],
    });
    const verkada = await send('verkada', [
      { type: 'exit', timestamp: isoAgo(), payload: { count: 0 } },
      { type: 'exit', timestamp: isoAgo(), payload: { count: 2.5 } },
      { type: 'exit', timestamp: isoAgo(), payload: {} },
    ]);
    expect(verkada.body).toEqual({
      accepted: 1,
      rejected: 2,
      errors: [
        { index: 0, reason: 'payload.count: too small: expected number to be >=1' },
        { index: 1, reason: 'payload.count: expected int, received number' },
      ],
    });
    const published = await tap.waitFor(venue.id, 3);
    expect(published.map((p) => p.event.metrics)).toEqual([{ exits: 1, occupancy: 0 }, { exits: 1 }, { exits: 1 }]);
  });
});

describe('canonical events', () => {
  it('keep the event time to the millisecond from any offset, and a Square re-delivery keeps its id', async () => {
    const venue = await newVenue(api, op.key);
    const ms = Math.floor((Date.now() - 3_600_000) / 1000) * 1000 + 123;
    const local = new Date(ms + 2 * 3_600_000).toISOString().replace('Z', '456+02:00');
    const payment = {
      event_id: 'evt-1',
      payment_id: 'pay-1',
      amount_money: { amount: 990, currency: 'EUR' },
      status: 'COMPLETED',
      customer_id: 'CUST-9',
    };
    const send = (events: unknown[]) => ingest(api, op.key, { venue_id: venue.id, connector_type: 'square', events });
    const first = await send([
      { type: 'transaction', timestamp: local, payload: payment },
      { type: 'transaction', timestamp: local, payload: { ...payment, event_id: 'evt-2', status: 'APPROVED' } },
      { type: 'transaction', timestamp: local, payload: payment },
    ]);
    expect(first.body).toEqual({ accepted: 2, rejected: 1, errors: [{ index: 2, reason: 'duplicate of event 0 (same vendor event id)' }] });
    expect((await send([{ type: 'transaction', timestamp: local, payload: payment }])).body.accepted).toBe(1);
    const [a, b, again] = (await tap.waitFor(venue.id, 3)).map((p) => p.event);
    expect(a!.ts).toBe(ms);
    expect(a!.metrics).toEqual({ amount: 990 });
    expect(b!.metrics).toEqual({});
    expect(again!.id).toBe(a!.id);
    expect(b!.id).not.toBe(a!.id);
    expect(a!.payload.customer_id).toBe(expectedPseudonym(op.id, 'customer_id:CUST-9'));
  });
});
