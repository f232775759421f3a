import { describe, expect, it } from 'vitest';
import { AppError } from '../../../lib/errors.js';
import { checkEvents } from '../../../domain/ingest/ingest.js';
import { IntegrationCache, RECEIVERS } from '../../../domain/ingest/receivers/index.js';
import { parseJsonBody, safeEqual, type WebhookRequest } from '../../../domain/ingest/receivers/kit.js';
import { mapMeraki, merakiReceiver, sightingId } from '../../../domain/ingest/receivers/meraki.js';
import { mapSquare, squareReceiver, squareSignature } from '../../../domain/ingest/receivers/square.js';
import { mapVerkada, verkadaReceiver, verkadaSignature } from '../../../domain/ingest/receivers/verkada.js';
import { densityReceiver, mapDensity } from '../../../domain/ingest/receivers/density.js';
import type { SourceIntegration } from '../../../domain/integrations/sources.js';

/** Pure checks of the receivers: verification and mapping, no engines. */

const NOW = Date.parse('2026-11-27T10:00:30Z');
const req = (rawBody: string, headers: Record<string, string> = {}): WebhookRequest => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])) },
  rawBody,
  now: NOW,
});
const errorOf = (fn: () => unknown): AppError => {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected an AppError');
};
/** The mapped events as ingest would judge them (same connector rules, now = NOW). */
const judged = (connector: 'meraki' | 'square' | 'verkada' | 'density', events: unknown[]) =>
  checkEvents(events, connector, NOW, { days: 365, plan: 'Business' });

describe('receivers', () => {
  it('exist for the pushing connectors only', () => {
    expect(Object.keys(RECEIVERS).sort()).toEqual(['density', 'meraki', 'square', 'verkada']);
  });

  it('compare secrets in constant time over digests, whatever the lengths', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abcd')).toBe(false);
    expect(safeEqual('', 'x')).toBe(false);
  });

  it('parse JSON bodies only, naming body', () => {
    expect(errorOf(() => parseJsonBody({ ...req('{}'), headers: { 'content-type': 'text/plain' } })).details).toEqual([
      { field: 'body', message: 'unsupported content type text/plain' },
    ]);
    expect(errorOf(() => parseJsonBody(req('{"a":'))).status).toBe(400);
    expect(errorOf(() => parseJsonBody(req('['.repeat(100) + ']'.repeat(100)))).message).toContain('nested deeper');
    expect(parseJsonBody(req('{"a":1}', { 'content-type': 'application/json; charset=utf-8' }))).toEqual({ a: 1 });
  });
});

describe('meraki', () => {
  const config = { webhook_secret: 's3cret', validator: 'abc123' };
  const v2 = (observations: unknown[], type = 'DevicesSeen') => ({
    version: '2.1',
    secret: 's3cret',
    type,
    data: { apMac: '00:18:0a:13:dd:b0', observations },
  });

  it('answers the validator; verifies the body secret', () => {
    expect(merakiReceiver.answerGet!(config)).toBe('abc123');
    expect(errorOf(() => merakiReceiver.answerGet!({})).status).toBe(404);
    const body = v2([]);
    expect(() => merakiReceiver.verify(config, req(''), () => body)).not.toThrow();
    expect(errorOf(() => merakiReceiver.verify(config, req(''), () => ({ ...body, secret: 's3cre' }))).status).toBe(401);
    expect(errorOf(() => merakiReceiver.verify(config, req(''), () => ({ ...body, secret: 7 }))).message).toContain('no "secret" field');
    expect(errorOf(() => merakiReceiver.verify({}, req(''), () => body)).message).toContain('no webhook_secret');
  });

  it('maps v2 observations to device_seen with the AP of the post, without IPs; ingest accepts them', () => {
    const { events, ignored } = mapMeraki(
      v2([
        {
          clientMac: '60:F8:1D:CA:0D:4C',
          ipv4: '/10.0.0.2',
          ipv6: null,
          seenTime: '2026-11-27T10:00:05Z',
          seenEpoch: 1795773605,
          ssid: null,
          os: 'iOS',
          manufacturer: 'Apple',
          rssi: 33,
          location: { lat: 1, lng: 2, unc: 3, x: [], y: [] },
        },
      ]),
    );
    expect(ignored).toBe(0);
    expect(events).toEqual([
      {
        type: 'device_seen',
        timestamp: '2026-11-27T10:00:05Z',
        event_id: expect.stringMatching(/^meraki:wifi:[0-9a-f]{32}:\d+$/),
        payload: {
          clientMac: '60:F8:1D:CA:0D:4C',
          radio: 'WiFi',
          ssid: null,
          os: 'iOS',
          manufacturer: 'Apple',
          apMac: '00:18:0a:13:dd:b0',
          rssi: 33,
          seenEpoch: 1795773605,
          location: { lat: 1, lng: 2, unc: 3 },
        },
      },
    ]);
    expect(events[0]!.event_id).not.toContain('60f81d');
    expect(judged('meraki', events).errors).toEqual([]);
  });

  it('maps v3 from latestRecord and drops userId, IPs and the locations arrays', () => {
    const body = {
      version: '3.0',
      secret: 's3cret',
      type: 'Bluetooth',
      data: {
        networkId: 'N_1',
        observations: [
          {
            clientMac: 'aa:bb:cc:dd:ee:ff',
            userId: 'u@example.com',
            ipv4: '1.1.1.1',
            locations: [],
            latestRecord: { time: '2026-11-27T10:00:10Z', nearestApMac: '00:00:00:00:00:01', nearestApRssi: -80 },
          },
        ],
      },
    };
    const [e] = mapMeraki(body).events;
    expect(e).toEqual({
      type: 'device_seen',
      timestamp: '2026-11-27T10:00:10Z',
      event_id: expect.stringMatching(/^meraki:ble:/),
      payload: { clientMac: 'aa:bb:cc:dd:ee:ff', radio: 'Bluetooth', apMac: '00:00:00:00:00:01', rssi: -80 },
    });
    expect(judged('meraki', [e]).valid).toHaveLength(1);
  });

  it('gives one sighting id per radio class, MAC spelling and minute; drops repeats in one post', () => {
    const a = sightingId('WiFi', 'AA-BB-CC-DD-EE-FF', '2026-11-27T10:00:01Z');
    expect(sightingId('WiFi', 'aabb.ccdd.eeff', '2026-11-27T10:00:59.999Z')).toBe(a);
    expect(sightingId('WiFi', 'aa:bb:cc:dd:ee:ff', '2026-11-27T10:01:00Z')).not.toBe(a);
    expect(sightingId('BLE', 'aa:bb:cc:dd:ee:ff', '2026-11-27T10:00:01Z')).toBe(
      sightingId('Bluetooth', 'aa:bb:cc:dd:ee:ff', '2026-11-27T10:00:30Z'),
    );
    expect(sightingId('BLE', 'aa:bb:cc:dd:ee:ff', '2026-11-27T10:00:01Z')).not.toBe(a);
    expect(sightingId('WiFi', 'not a mac', '2026-11-27T10:00:01Z')).toBeUndefined();
    const twice = mapMeraki(
      v2([
        { clientMac: 'aa:bb:cc:dd:ee:ff', seenTime: '2026-11-27T10:00:01Z' },
        { clientMac: 'AA:BB:CC:DD:EE:FF', seenTime: '2026-11-27T10:00:40Z' },
      ]),
    );
    expect(twice.events).toHaveLength(1);
    expect(twice.ignored).toBe(1);
  });

  it('lets ingest reject a bad observation on its own, and refuses what is not a post with 400 naming the field', () => {
    const { events } = mapMeraki(
      v2([{ seenTime: '2026-11-27T10:00:01Z' }, 'x', { clientMac: 'aa:bb:cc:dd:ee:ff', seenTime: '2026-11-27T10:00:01Z' }]),
    );
    const { valid, errors } = judged('meraki', events);
    expect(valid).toHaveLength(1);
    expect(errors.map((e) => e.index)).toEqual([0, 1]);
    expect(errorOf(() => mapMeraki({ version: '1.0' })).details).toEqual([{ field: 'version', message: expect.any(String) }]);
    expect(errorOf(() => mapMeraki({ version: '3.0', type: 'DevicesSeen' })).details).toEqual([
      { field: 'type', message: expect.any(String) },
    ]);
    expect(errorOf(() => mapMeraki({ version: '2.0', type: 'DevicesSeen', data: { observations: {} } })).details).toEqual([
      { field: 'data.observations', message: 'expected an array' },
    ]);
    expect(errorOf(() => mapMeraki([])).status).toBe(400);
  });
});

describe('verkada', () => {
  const config = { webhook_secret: 'vk-secret' };
  const raw = JSON.stringify({
    webhook_type: 'sensor_alert',
    webhook_id: 'w1',
    created_at: NOW / 1000 - 5,
    data: { alert_event_id: 'a1', reading: 'co2', most_extreme_value: 1200, device_id: 'd1' },
  });
  const header = (ts: number, secret = 'vk-secret', body = raw) => ({
    'Verkada-Signature': `${ts}|${verkadaSignature(secret, body, String(ts))}`,
  });

  it('verifies HMAC-SHA256(secret, body|timestamp) within 60 s', () => {
    const ts = NOW / 1000 - 30;
    expect(() => verkadaReceiver.verify(config, req(raw, header(ts)), () => undefined)).not.toThrow();
    expect(() =>
      verkadaReceiver.verify(config, req(raw, { 'Verkada-Signature': header(ts)['Verkada-Signature'].toUpperCase() }), () => undefined),
    ).not.toThrow();
    expect(errorOf(() => verkadaReceiver.verify(config, req(raw, header(NOW / 1000 - 61)), () => undefined)).message).toMatch(
      /61 s away .* at most 60 s/,
    );
    expect(errorOf(() => verkadaReceiver.verify(config, req(raw, header(ts, 'other')), () => undefined)).status).toBe(401);
    expect(errorOf(() => verkadaReceiver.verify(config, req(raw + ' ', header(ts)), () => undefined)).status).toBe(401);
    expect(errorOf(() => verkadaReceiver.verify(config, req(raw, { 'Verkada-Signature': `${ts}` }), () => undefined)).message).toContain(
      'malformed',
    );
    expect(errorOf(() => verkadaReceiver.verify({}, req(raw, header(ts)), () => undefined)).message).toContain('no webhook_secret');
  });

  it('maps sensor alerts with a telemetry reading to environment, with a stable event id; ignores the rest', () => {
    const { events } = mapVerkada(JSON.parse(raw));
    expect(events).toEqual([
      {
        type: 'environment',
        timestamp: new Date(NOW - 5000).toISOString(),
        payload: { co2: 1200, device_id: 'd1' },
        event_id: expect.stringMatching(/^verkada:[0-9a-f]{40}$/),
      },
    ]);
    expect(mapVerkada(JSON.parse(raw)).events[0]!.event_id).toBe(events[0]!.event_id);
    expect(judged('verkada', events).errors).toEqual([]);
    expect(mapVerkada({ webhook_type: 'lpr', data: {} })).toMatchObject({ events: [], ignored: 1 });
    expect(mapVerkada({ webhook_type: 'sensor_alert', data: { reading: 'pm_2_5', most_extreme_value: 3 } })).toMatchObject({
      events: [],
      ignored: 1,
    });
    expect(errorOf(() => mapVerkada({ webhook_type: 'sensor_alert', data: { reading: 'humidity' } })).details).toEqual([
      { field: 'data.most_extreme_value', message: 'expected a number' },
    ]);
  });
});

describe('square', () => {
  const config = { webhook_signature_key: 'key', notification_url: 'https://h.example.com/hooks/1', location_id: 'L1' };
  const body = {
    type: 'payment.created',
    event_id: 'ev-1',
    created_at: new Date(NOW - 1000).toISOString(),
    data: {
      object: {
        payment: {
          id: 'p1',
          status: 'COMPLETED',
          amount_money: { amount: 5, currency: 'USD' },
          location_id: 'L1',
          customer_id: null,
          card_details: { last_4: '1111' },
        },
      },
    },
  };
  const raw = JSON.stringify(body);

  it('verifies base64(HMAC-SHA256(key, notification_url + body))', () => {
    const sig = squareSignature('key', config.notification_url, raw);
    expect(() => squareReceiver.verify(config, req(raw, { 'x-square-hmacsha256-signature': sig }), () => undefined)).not.toThrow();
    expect(
      errorOf(() =>
        squareReceiver.verify(
          config,
          req(raw, { 'x-square-hmacsha256-signature': squareSignature('key', 'https://x', raw) }),
          () => undefined,
        ),
      ).status,
    ).toBe(401);
    expect(errorOf(() => squareReceiver.verify({}, req(raw, { 'x-square-hmacsha256-signature': sig }), () => undefined)).message).toContain(
      'webhook_signature_key',
    );
  });

  it("maps payments of the integration's location with Square's event_id; ignores other locations and types", () => {
    const { events } = mapSquare(body, 'L1');
    expect(events).toEqual([
      {
        type: 'transaction',
        timestamp: body.created_at,
        event_id: 'ev-1',
        payload: {
          event_id: 'ev-1',
          event_type: 'payment.created',
          payment_id: 'p1',
          status: 'COMPLETED',
          amount_money: { amount: 5, currency: 'USD' },
          location_id: 'L1',
        },
      },
    ]);
    expect(judged('square', events).errors).toEqual([]);
    expect(mapSquare(body, 'L2')).toMatchObject({ events: [], ignored: 1 });
    expect(mapSquare({ ...body, type: 'refund.updated' }, 'L1')).toMatchObject({ events: [], ignored: 1 });
  });
});

describe('density', () => {
  const config = { webhook_header_name: 'X-Token', webhook_header_value: 'v' };

  it('verifies the configured header', () => {
    expect(() => densityReceiver.verify(config, req('{}', { 'x-token': 'v' }), () => undefined)).not.toThrow();
    expect(errorOf(() => densityReceiver.verify(config, req('{}', { 'x-token': 'w' }), () => undefined)).message).toBe(
      "the X-Token header does not match this integration's webhook_header_value",
    );
    expect(errorOf(() => densityReceiver.verify(config, req('{}'), () => undefined)).message).toContain('X-Token header is missing');
  });

  it('maps direction to entry / exit with the count; an id and timestamp when given, else receipt time', () => {
    expect(mapDensity({ space_id: 'spc_1', doorway_id: 'drw_1', direction: -1, count: 4 }, NOW).events).toEqual([
      {
        type: 'exit',
        timestamp: new Date(NOW).toISOString(),
        payload: { space_id: 'spc_1', doorway_id: 'drw_1', direction: -1, count: 4 },
      },
    ]);
    const [e] = mapDensity({ id: 'evt_9', timestamp: 1795773600, direction: 1 }, NOW).events;
    expect(e).toEqual({ type: 'entry', timestamp: new Date(1795773600_000).toISOString(), payload: { direction: 1 }, event_id: 'evt_9' });
    expect(judged('density', [e]).errors).toEqual([]);
    expect(errorOf(() => mapDensity({ direction: '1' }, NOW)).details).toEqual([{ field: 'direction', message: 'expected 1 or -1' }]);
  });
});

describe('IntegrationCache', () => {
  it('looks an integration up once per TTL, remembers unknown ids, forgets failures', async () => {
    let t = 0;
    const loads: string[] = [];
    let fail = false;
    const cache = new IntegrationCache(
      async (id) => {
        loads.push(id);
        if (fail) throw new Error('postgres away');
        return id === 'known' ? ({ id } as SourceIntegration) : undefined;
      },
      5000,
      2,
      () => t,
    );
    expect(await cache.get('known')).toEqual({ id: 'known' });
    expect(await cache.get('other')).toBeUndefined();
    t = 4999;
    await cache.get('known');
    await cache.get('other');
    expect(loads).toEqual(['known', 'other']);
    t = 5000;
    await cache.get('known');
    expect(loads).toEqual(['known', 'other', 'known']);
    fail = true;
    t = 20_000;
    await expect(cache.get('known')).rejects.toThrow('postgres away');
    fail = false;
    expect(await cache.get('known')).toEqual({ id: 'known' });
    expect(loads).toHaveLength(5);
  });
});
