import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { deliver, expectNoRawMac, expectNothingStored, newIntegration, startHookStack, waitForStored, type HookStack } from './support.js';

let stack: HookStack;
let op: TestOperator;
beforeAll(async () => {
  stack = await startHookStack();
  op = await newOperator(stack.api, 'pro');
});
afterAll(async () => {
  await stack?.close();
});

const SECRET = 'meraki-shared-secret-1';
const VALIDATOR = 'a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0';
const config = (extra: Record<string, unknown> = {}) => ({
  api_key: 'meraki-api-key-123',
  org_id: '549236',
  webhook_secret: SECRET,
  validator: VALIDATOR,
  ...extra,
});

/** A venue with a Meraki integration of the test operator (or another). */
async function merakiVenue(owner: TestOperator = op, extra: Record<string, unknown> = {}): Promise<{ venueId: string; hookId: string }> {
  const venueId = (await newVenue(stack.api, owner.key)).id;
  return { venueId, hookId: await newIntegration(stack.api, owner.key, venueId, 'meraki', config(extra)) };
}

/** A whole minute a little in the past, so every sighting in it is within ingest's window. */
const minute = Math.floor(Date.now() / 60_000) * 60_000 - 120_000;
const at = (s: number) => new Date(minute + s * 1000).toISOString();

/** Meraki's documented v2 example (DevicesSeen), with recent times. */
function v2Post(opts: { secret?: string; apMac?: string; type?: string; observations?: unknown[] } = {}) {
  return {
    version: '2.0',
    secret: opts.secret ?? SECRET,
    type: opts.type ?? 'DevicesSeen',
    data: {
      apMac: opts.apMac ?? '00:18:0a:13:dd:b0',
      apFloors: [],
      apTags: ['dev', 'home', 'test'],
      observations: opts.observations ?? [
        {
          ipv4: '/192.168.0.15',
          location: { lat: 51.5355157, lng: -0.06990350000000944, unc: 1.233417960754815, x: [], y: [] },
          seenTime: at(21),
          ssid: '.interwebs',
          os: 'Apple iOS',
          clientMac: '60:f8:1d:ca:0d:4c',
          seenEpoch: Math.floor((minute + 21_000) / 1000),
          rssi: 40,
          ipv6: null,
          manufacturer: 'Apple',
        },
        {
          ipv4: null,
          location: { lat: 51.5355, lng: -0.0699, unc: 3.2, x: [], y: [] },
          seenTime: at(35),
          ssid: null,
          os: null,
          clientMac: '8c:85:90:12:34:56',
          seenEpoch: Math.floor((minute + 35_000) / 1000),
          rssi: 17,
          ipv6: null,
          manufacturer: 'Apple',
        },
      ],
    },
  };
}

/** Meraki's documented v3 example (one post per network), WiFi or BLE. */
function v3Post(type: 'WiFi' | 'BLE', secret = SECRET) {
  const wifi = type === 'WiFi';
  return {
    version: '3.0',
    secret,
    type,
    data: {
      networkId: 'N_24329156',
      observations: [
        {
          clientMac: wifi ? '00:11:22:33:44:55' : 'c2:1f:8a:10:20:30',
          ipv4: wifi ? '1.2.3.4' : null,
          ipv6: null,
          ssid: wifi ? 'Guest WiFi' : null,
          os: wifi ? 'Android' : null,
          manufacturer: wifi ? 'Samsung' : 'Unknown',
          userId: wifi ? 'guest@example.com' : null,
          locations: [
            {
              time: at(12),
              lat: 37.4180951010362,
              lng: -122.098531723022,
              x: 5.2,
              y: 3.1,
              variance: 3.4,
              floorPlanId: 'g_1',
              floorPlanName: 'Floor 1',
              nearestApTags: ['lobby'],
              rssiRecords: [{ apMac: '00:18:0a:79:8d:00', rssi: -59 }],
            },
          ],
          latestRecord: { time: at(12), nearestApMac: '00:18:0a:79:8d:00', nearestApRssi: -59 },
        },
        {
          clientMac: wifi ? '3c:22:fb:1a:2b:3c' : 'd4:ca:6e:00:11:22',
          ipv4: null,
          ipv6: null,
          ssid: null,
          os: null,
          manufacturer: 'Apple',
          userId: null,
          locations: [],
          latestRecord: { time: at(48), nearestApMac: '00:18:0a:79:8d:01', nearestApRssi: -71 },
        },
      ],
    },
  };
}

const payloadOf = (e: { payload: string }) => JSON.parse(e.payload) as Record<string, unknown>;

describe('GET /hooks/{id}: Meraki validation', () => {
  it('answers the configured validator as text/plain; without one a 404 saying what to configure', async () => {
    const { hookId } = await merakiVenue();
    const res = await fetch(`${stack.api.url}/hooks/${hookId}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await res.text()).toBe(VALIDATOR);

    const venueId = (await newVenue(stack.api, op.key)).id;
    const bare = await newIntegration(stack.api, op.key, venueId, 'meraki', { api_key: 'k', org_id: '1', webhook_secret: SECRET });
    const none = await request(`${stack.api.url}/hooks/${bare}`);
    expect(none.status).toBe(404);
    expect(none.body).toEqual({ error: expect.stringContaining('config.validator'), code: 'NOT_FOUND' });
  });
});

describe('POST /hooks/{id}: Meraki Scanning API', () => {
  it('stores a v2 DevicesSeen post: one device_seen per observation, at its seenTime, pseudonymised, no IPs', async () => {
    const { venueId, hookId } = await merakiVenue();
    const res = await deliver(stack.api, hookId, JSON.stringify(v2Post()));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ accepted: 2, rejected: 0, ignored: 0 });
    const stored = await waitForStored(stack.api, venueId, 2);
    expect(stored.map((e) => [e.event_type, e.connector_type, e.ts_ms])).toEqual([
      ['device_seen', 'meraki', minute + 21_000],
      ['device_seen', 'meraki', minute + 35_000],
    ]);
    expect(stored.map((e) => e.operator_id)).toEqual([op.id, op.id]);
    const first = payloadOf(stored[0]!);
    expect(first).toMatchObject({
      apMac: '00:18:0a:13:dd:b0',
      ssid: '.interwebs',
      rssi: 40,
      radio: 'WiFi',
      os: 'Apple iOS',
      manufacturer: 'Apple',
    });
    expect(first.location).toEqual({ lat: 51.5355157, lng: -0.06990350000000944, unc: 1.233417960754815 });
    expect(payloadOf(stored[1]!).ssid).toBeNull();
    for (const e of stored) expect(Object.keys(payloadOf(e))).not.toEqual(expect.arrayContaining(['ipv4']));
    expectNoRawMac(stored, ['60:f8:1d:ca:0d:4c', '8c:85:90:12:34:56']);
    expect(JSON.stringify(stored)).not.toContain('192.168.0.15');
  });

  it('stores a v2 BluetoothDevicesSeen post as BLE sightings', async () => {
    const { venueId, hookId } = await merakiVenue();
    const res = await deliver(stack.api, hookId, JSON.stringify(v2Post({ type: 'BluetoothDevicesSeen' })));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const stored = await waitForStored(stack.api, venueId, 2);
    expect(stored.map((e) => payloadOf(e).radio)).toEqual(['BLE', 'BLE']);
  });

  it.each(['WiFi', 'BLE'] as const)('stores a v3 %s post: time, rssi and AP from latestRecord, no userId', async (type) => {
    const { venueId, hookId } = await merakiVenue();
    const post = v3Post(type);
    const res = await deliver(stack.api, hookId, JSON.stringify(post));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ accepted: 2, rejected: 0, ignored: 0 });
    const stored = await waitForStored(stack.api, venueId, 2);
    expect(stored.map((e) => e.ts_ms)).toEqual([minute + 12_000, minute + 48_000]);
    expect(payloadOf(stored[0]!)).toMatchObject({
      radio: type,
      rssi: -59,
      apMac: '00:18:0a:79:8d:00',
      location: { lat: 37.4180951010362, lng: -122.098531723022 },
    });
    expect(payloadOf(stored[1]!)).toMatchObject({ radio: type, rssi: -71, apMac: '00:18:0a:79:8d:01' });
    expect(JSON.stringify(stored)).not.toContain('guest@example.com');
    expect(JSON.stringify(stored)).not.toContain('1.2.3.4');
    expectNoRawMac(
      stored,
      post.data.observations.map((o) => o.clientMac),
    );
  });

  it('refuses a wrong or missing secret with 401, stores nothing, and reports the refusal to connector health', async () => {
    const { venueId, hookId } = await merakiVenue();
    const wrong = await deliver(stack.api, hookId, JSON.stringify(v2Post({ secret: 'not-the-secret' })));
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({ error: expect.stringContaining('"secret" field'), code: 'UNAUTHORIZED' });
    expect(JSON.stringify(wrong.body)).not.toContain(SECRET);
    const { secret: _omit, ...unsigned } = v2Post();
    const missing = await deliver(stack.api, hookId, JSON.stringify(unsigned));
    expect(missing.status).toBe(401);
    expect(missing.body.error).toContain('no "secret" field');
    const report = await stack.reports.waitFor((r) => r.source?.integrationId === hookId && r.source.ok === false);
    expect(report).toMatchObject({
      operatorId: op.id,
      venueId,
      connectorType: 'meraki',
      accepted: 0,
      rejected: 0,
      source: { link: 'webhook', ok: false },
    });
    expect(report.source!.error).toEqual(expect.stringContaining('secret'));
    expect(report.source!.error).not.toContain(SECRET);
    await expectNothingStored(stack.api, venueId);
  });

  it('answers 400 naming the field for a body that is not a Scanning API post, and reports it', async () => {
    const { venueId, hookId } = await merakiVenue();
    const badJson = await deliver(stack.api, hookId, '{"version":"2.0",');
    expect(badJson.status).toBe(400);
    expect(badJson.body.code).toBe('VALIDATION_ERROR');
    const badType = await deliver(stack.api, hookId, JSON.stringify({ ...v2Post(), type: 'Observations' }));
    expect(badType.status).toBe(400);
    expect(badType.body.details).toEqual([{ field: 'type', message: expect.any(String) }]);
    const noData = await deliver(stack.api, hookId, JSON.stringify({ version: '3.0', secret: SECRET, type: 'WiFi', data: {} }));
    expect(noData.status).toBe(400);
    expect(noData.body.details[0].field).toBe('data.observations');
    await stack.reports.waitFor((r) => r.source?.integrationId === hookId && r.source.ok === false && /type/.test(r.source.error ?? ''));
    await expectNothingStored(stack.api, venueId, 500);
  });

  it('stores a replayed post once, and one client seen by two APs in the same minute once', async () => {
    const { venueId, hookId } = await merakiVenue();
    const body = JSON.stringify(v2Post());
    expect((await deliver(stack.api, hookId, body)).status).toBe(200);
    expect((await deliver(stack.api, hookId, body)).status).toBe(200);
    // The same two clients, reported by another AP 20 s later in the same minute.
    const other = v2Post({ apMac: '00:18:0a:13:dd:b1' });
    for (const o of other.data.observations)
      (o as { seenTime: string }).seenTime = at(Number((o as { seenTime: string }).seenTime.slice(17, 19)) + 20);
    expect((await deliver(stack.api, hookId, JSON.stringify(other))).body).toEqual({ accepted: 2, rejected: 0, ignored: 0 });
    const stored = await waitForStored(stack.api, venueId, 2);
    expect(new Set(stored.map((e) => e.device)).size).toBe(2);
    // The same client in the next minute is a new sighting.
    const next = v2Post({ observations: [{ ...v2Post().data.observations[0]!, seenTime: at(75) }] });
    expect((await deliver(stack.api, hookId, JSON.stringify(next))).status).toBe(200);
    await waitForStored(stack.api, venueId, 3);
  });

  it('takes more than 1,000 observations in one post (several ingest batches)', async () => {
    const { venueId, hookId } = await merakiVenue();
    const observations = Array.from({ length: 1500 }, (_, i) => ({
      clientMac: `02:00:00:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`,
      seenTime: at(5 + (i % 50)),
      rssi: 20,
      ssid: null,
    }));
    const res = await deliver(stack.api, hookId, JSON.stringify(v2Post({ observations })));
    expect(res.body).toEqual({ accepted: 1500, rejected: 0, ignored: 0 });
    await waitForStored(stack.api, venueId, 1500, 25_000);
  });
});

describe('POST /hooks/{id}: which integration', () => {
  it('answers 404 alike for an unknown, a malformed, a paused and a deleted integration, and for a polled connector', async () => {
    const unknown = await deliver(stack.api, '0b5e8a3c-1f7e-4c55-9a39-6b0f9e3c1d22', JSON.stringify(v2Post()));
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: 'integration not found', code: 'NOT_FOUND' });
    expect((await deliver(stack.api, 'not-a-uuid', JSON.stringify(v2Post()))).body).toEqual(unknown.body);

    const venueId = (await newVenue(stack.api, op.key)).id;
    const paused = await newIntegration(stack.api, op.key, venueId, 'meraki', config());
    const put = await request(`${stack.api.url}/api/venues/${venueId}/integrations/${paused}`, {
      method: 'PUT',
      key: op.key,
      json: { is_active: false },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect((await deliver(stack.api, paused, JSON.stringify(v2Post()))).body).toEqual(unknown.body);
    const deleted = await newIntegration(stack.api, op.key, venueId, 'meraki', config());
    expect(
      (await request(`${stack.api.url}/api/venues/${venueId}/integrations/${deleted}`, { method: 'DELETE', key: op.key })).status,
    ).toBe(200);
    expect((await deliver(stack.api, deleted, JSON.stringify(v2Post()))).body).toEqual(unknown.body);

    const unifi = await newIntegration(stack.api, op.key, venueId, 'unifi', {
      controller_url: 'https://unifi.example.com',
      username: 'u',
      password: 'p',
    });
    const polled = await deliver(stack.api, unifi, JSON.stringify(v2Post()));
    expect(polled.status).toBe(404);
    expect(polled.body.error).toContain('unifi connector has no webhook receiver');
    await expectNothingStored(stack.api, venueId, 500);
  });

  it("stores another operator's delivery in that operator's venue only, reachable only by its own integration's URL", async () => {
    const other = await newOperator(stack.api, 'pro');
    const mine = await merakiVenue(op);
    const theirs = await merakiVenue(other, { webhook_secret: 'their-secret' });
    // Their post with my secret is refused: each URL checks its own integration's secret.
    expect((await deliver(stack.api, theirs.hookId, JSON.stringify(v2Post()))).status).toBe(401);
    const res = await deliver(stack.api, theirs.hookId, JSON.stringify(v2Post({ secret: 'their-secret' })));
    expect(res.status).toBe(200);
    const stored = await waitForStored(stack.api, theirs.venueId, 2);
    expect(stored.map((e) => e.operator_id)).toEqual([other.id, other.id]);
    await expectNothingStored(stack.api, mine.venueId, 300);
  });
});
