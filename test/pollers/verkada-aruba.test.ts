import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollerState } from '../../postgres/queries/pollers.js';
import { pseudonym, Pseudonyms } from '../../domain/ingest/pseudonyms.js';
import { capturedLogger, FakeServer, json, PollerEnv, selfSignedCert, until } from './support.js';

/** The Verkada people-count and Aruba ALE presence pollers against fake vendor servers. */
let env: PollerEnv;
const tls = selfSignedCert();
const BUCKET = 900;

beforeAll(async () => {
  env = await PollerEnv.start('pollva');
});
afterAll(async () => {
  await env?.close();
});

/** Verkada: /token for the API key, occupancy trends per camera from `buckets`, filtered by start_time/end_time as the API does. */
class FakeVerkada {
  server!: FakeServer;
  tokens = new Set<string>();
  tokenCalls = 0;
  /** camera → preset → direction → [start, end, count] */
  trends = new Map<string, { presets: boolean; lines: Record<string, { in: number[][]; out: number[][] }> }>();
  queries: URLSearchParams[] = [];
  constructor(readonly apiKey: string) {}
  static async start(apiKey: string): Promise<FakeVerkada> {
    const v = new FakeVerkada(apiKey);
    v.server = await FakeServer.start(tls, (req, _body, res) => v.handle(req, res));
    return v;
  }
  private handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'https://x');
    if (req.method === 'POST' && url.pathname === '/token') {
      if (req.headers['x-api-key'] !== this.apiKey) return json(res, 401, { message: 'invalid API key' });
      this.tokenCalls++;
      const token = `tok-${this.tokenCalls}`;
      this.tokens.add(token);
      return json(res, 200, { token });
    }
    if (req.method === 'GET' && url.pathname === '/cameras/v1/analytics/occupancy_trends') {
      if (!this.tokens.has(String(req.headers['x-verkada-auth']))) return json(res, 401, { message: 'token expired' });
      this.queries.push(url.searchParams);
      const camera = this.trends.get(url.searchParams.get('camera_id') ?? '');
      if (!camera) return json(res, 404, { message: 'camera not found' });
      const start = Number(url.searchParams.get('start_time'));
      const end = Number(url.searchParams.get('end_time'));
      const within = (b: number[]) => b[0]! >= start && b[0]! < end;
      const lines = Object.entries(camera.lines).map(([preset, l]) => ({
        preset_id: preset,
        trend_in: l.in.filter(within),
        trend_out: l.out.filter(within),
      }));
      if (camera.presets) return json(res, 200, { camera_id: url.searchParams.get('camera_id'), presets: lines });
      return json(res, 200, { camera_id: url.searchParams.get('camera_id'), trend_in: lines[0]!.trend_in, trend_out: lines[0]!.trend_out });
    }
    json(res, 404, { message: 'no such path' });
  }
}

describe('Verkada poller', () => {
  it('brings complete trend buckets in as entry/exit counts, once, across a restart, looking back at most 24 h', async () => {
    const apiKey = 'vk-api-key-0123456789abcdef';
    const fake = await FakeVerkada.start(apiKey);
    const { venueId, integrationId } = await env.integration('verkada', {
      org_id: 'org-1',
      api_key: apiKey,
      region: 'eu',
      camera_ids: ['cam-1', 'cam-2'],
    });
    const nowS = Math.floor(Date.now() / 1000);
    const current = Math.floor(nowS / BUCKET) * BUCKET; // the bucket in progress
    const b = (k: number, count: number) => [current - k * BUCKET, current - (k - 1) * BUCKET, count];
    fake.trends.set('cam-1', {
      presets: true,
      lines: {
        'door-1': { in: [b(100, 50), b(6, 3), b(5, 0), b(4, 2), b(1, 7), b(0, 9)], out: [b(6, 1), b(2, 4)] },
        'door-2': { in: [b(3, 5)], out: [] },
      },
    });
    fake.trends.set('cam-2', { presets: false, lines: { main: { in: [b(5, 11)], out: [b(5, 10)] } } });

    // The pollers' clocks, so which buckets are complete does not depend on when the test runs: the
    // second run's clock is 5 minutes into the bucket in progress (b0 incomplete, b1 complete); the
    // first run's 40 minutes behind it (b4 complete, b3 not yet).
    const shift = (current + 300) * 1000 - Date.now();
    const behind = 40 * 60_000;
    const first = env.runner(capturedLogger().log, {
      baseUrls: { verkada: fake.server.url },
      ca: tls.cert,
      now: () => Date.now() + shift - behind,
    });
    try {
      await until('the first run moved its cursor', async () => (await pollerState(env.api.services.db, integrationId))?.cursor);
      // First run: cam-1 door-1 in b6, b4 and out b6; cam-2 in and out b5.
      await env.waitStored(venueId, 5);
    } finally {
      await first.stop();
    }
    const second = env.runner(capturedLogger().log, {
      baseUrls: { verkada: fake.server.url },
      ca: tls.cert,
      now: () => Date.now() + shift,
    });
    try {
      // Every complete bucket with people, once: cam-1 door-1 in b6,b4,b1 · out b6,b2 · door-2 in b3 · cam-2 in b5 · out b5.
      const rows = await env.waitStored(venueId, 8);
      const sum = (type: string) => rows.filter((r) => r.event_type === type).reduce((n, r) => n + r.metric_values[0]!, 0);
      expect(sum('entry')).toBe(3 + 2 + 7 + 5 + 11);
      expect(sum('exit')).toBe(1 + 4 + 10);
      const b6 = rows.find(
        (r) => r.event_type === 'entry' && JSON.parse(r.payload).line_id === 'door-1' && JSON.parse(r.payload).count === 3,
      )!;
      expect(b6.ts).toBe(new Date((current - 6 * BUCKET) * 1000).toISOString().slice(0, 19).replace('T', ' '));
      expect(JSON.parse(b6.payload)).toEqual({
        camera_id: 'cam-1',
        line_id: 'door-1',
        count: 3,
        bucket_start: current - 6 * BUCKET,
        bucket_end: current - 5 * BUCKET,
      });
      expect(b6.metric_names).toEqual(['entries']);
      const cam2 = rows.filter((r) => JSON.parse(r.payload).camera_id === 'cam-2');
      expect(cam2.map((r) => JSON.parse(r.payload).line_id)).toEqual(['all', 'all']);
      // The first query of a camera starts at most 24 h (and a bucket) back; the 100-buckets-old one never came.
      expect(Number(fake.queries[0]!.get('start_time'))).toBeGreaterThanOrEqual(current + 300 - behind / 1000 - 24 * 3600 - BUCKET);
      expect(fake.queries[0]!.get('interval')).toBe('15_minutes');
      expect(fake.queries[0]!.get('type')).toBe('person');
      const state = await pollerState(env.api.services.db, integrationId);
      expect(state!.cursor).toEqual({ cameras: { 'cam-1': current, 'cam-2': current - 4 * BUCKET } });

      // The token expires: one new token, and polling carries on.
      const calls = fake.tokenCalls;
      fake.tokens.clear();
      await until('a new token', () => fake.tokenCalls > calls);
      await env.waitStored(venueId, 8);
    } finally {
      await second.stop();
      await fake.server.close();
    }
  });

  it('names a wrong API key and an unknown camera', async () => {
    const fake = await FakeVerkada.start('the-right-key-000000');
    const wrong = await env.integration('verkada', { org_id: 'org-1', api_key: 'a-wrong-key-1111111', camera_ids: ['cam-1'] });
    const unknown = await env.integration('verkada', { org_id: 'org-1', api_key: 'the-right-key-000000', camera_ids: ['cam-9'] });
    const { log, text } = capturedLogger();
    const runner = env.runner(log, { baseUrls: { verkada: fake.server.url }, ca: tls.cert });
    try {
      const failure = (id: string) =>
        until(
          'a failed poll report',
          () => env.reports.find((r) => r.source?.integrationId === id && r.source.ok === false)?.source?.error,
        );
      expect(await failure(wrong.integrationId)).toMatch(/^Verkada answered 401 to https:\/\/127\.0\.0\.1:\d+\/token: check the API key/);
      expect(await failure(unknown.integrationId)).toMatch(
        /^Verkada answered 404 to https:\/\/127\.0\.0\.1:\d+\/cameras\/v1\/analytics\/occupancy_trends for camera cam-9: check camera_ids$/,
      );
    } finally {
      await runner.stop();
      await fake.server.close();
    }
    for (const secret of ['a-wrong-key-1111111', 'the-right-key-000000', 'tok-1']) expect(text()).not.toContain(secret);
  });
});

describe('Aruba ALE poller', () => {
  it('brings presence records in as device_seen events, pseudonymised (hashed ones too); Central integrations are not polled', async () => {
    const creds = { username: 'ale-user', password: 'ale-Pass-778899' };
    const auth = `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}`;
    const t = Math.floor(Date.now() / 1000) - 90;
    const hashed = 'ab'.repeat(20);
    let records: unknown[] = [
      {
        msg: {
          sta_eth_mac: { addr: 'D8:A1:19:0B:7C:2E' },
          associated: true,
          ap_name: 'AP-Lobby-1',
          radio_mac: { addr: '00:24:6c:aa:bb:cc' },
        },
        ts: t,
      },
      { msg: { hashed_sta_eth_mac: hashed, associated: false, ap_name: 'AP-Bar' }, ts: t + 2 },
    ];
    const ale = await FakeServer.start(tls, (req, _body, res) => {
      if (req.headers.authorization !== auth) return json(res, 401, { error: 'unauthorized' });
      if (req.url === '/api/v1/presence') return json(res, 200, { Presence_result: records });
      json(res, 404, {});
    });
    const { venueId, integrationId } = await env.integration('aruba', {
      mode: 'ale',
      base_url: ale.url,
      ...creds,
      certificate_sha256: tls.colons,
    });
    const wrong = await env.integration('aruba', {
      mode: 'ale',
      base_url: ale.url,
      username: 'ale-user',
      password: 'nope-nope-1',
      certificate_sha256: tls.sha256,
    });
    const central = await env.integration('aruba', {
      mode: 'central',
      base_url: 'https://apigw.central.example',
      customer_id: 'c1',
      client_id: 'id',
      client_secret: 'cs-secret',
      streaming_key: 'sk-secret',
    });
    const { log, text } = capturedLogger();
    const runner = env.runner(log);
    try {
      const rows = await env.waitStored(venueId, 2);
      const key = new Pseudonyms(env.cfg.PSEUDONYM_KEY).keyFor(env.op.id);
      expect(rows.map((r) => r.device)).toEqual([pseudonym(key, 'd8:a1:19:0b:7c:2e'), pseudonym(key, `hashed_sta_eth_mac:${hashed}`)]);
      expect(JSON.parse(rows[0]!.payload)).toEqual({
        sta_eth_mac: rows[0]!.device,
        associated: true,
        ap_name: 'AP-Lobby-1',
        radio_mac: '00:24:6c:aa:bb:cc',
      });
      expect(JSON.parse(rows[1]!.payload)).toEqual({ hashed_sta_eth_mac: rows[1]!.device, associated: false, ap_name: 'AP-Bar' });
      for (const r of rows) expect(r.payload.toLowerCase()).not.toMatch(/d8:a1:19|abababab/);
      records = [...records, { msg: { sta_eth_mac: { addr: 'D8:A1:19:0B:7C:2E' }, associated: false }, ts: t + 30 }];
      await env.waitStored(venueId, 3);

      const error = await until(
        'a failed poll report',
        () => env.reports.find((r) => r.source?.integrationId === wrong.integrationId && r.source.ok === false)?.source?.error,
      );
      expect(error).toMatch(/^ALE answered 401 to https:\/\/127\.0\.0\.1:\d+\/api\/v1\/presence: check username and password$/);
      expect(await pollerState(env.api.services.db, central.integrationId)).toBeUndefined();
      expect(runner.owned()).not.toContain(central.integrationId);
      expect((await pollerState(env.api.services.db, integrationId))!.failures).toBe(0);
    } finally {
      await runner.stop();
      await ale.close();
    }
    for (const secret of [creds.password, 'nope-nope-1', auth.slice(6), 'd8:a1:19', 'D8:A1:19']) expect(text()).not.toContain(secret);
  });
});
