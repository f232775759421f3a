import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql } from '../../clickhouse/client.js';
import { CONNECTORS } from '../../domain/ingest/connectors/index.js';
import { Pseudonyms } from '../../domain/ingest/pseudonyms.js';
import { RECEIVERS, type Receiver } from '../../domain/ingest/receivers/index.js';
import { Throughput } from '../../domain/system/throughput.js';
import { derivedTopicNames } from '../../lib/topology.js';
import type { ConnectorType } from '../../lib/events/vocabulary.js';
import { createLogger } from '../../lib/logger.js';
import { keyringFromConfig } from '../../lib/secret-box.js';
import { httpsRequest, jsonOf } from '../../pipeline/pollers/http.js';
import { startPollers, type RunningPollers } from '../../pipeline/pollers/runner.js';
import { unifiPoller } from '../../pipeline/pollers/unifi.js';
import { runEventsSink, type RunningEventsSink } from '../../pipeline/sink/events-sink.js';
import { ApiClient, ApiError } from '../../simulator/client.js';
import { setUpFleet, type Fleet } from '../../simulator/fleet.js';
import { openBetween, TrafficState } from '../../simulator/model.js';
import { ensureCertificate } from '../../simulator/native/controller.js';
import {
  FakeUnifiController,
  HookSender,
  NativeLinks,
  notificationUrl,
  translate,
  type Delivery,
  type LinkConfig,
  type UnifiRecord,
} from '../../simulator/native/index.js';
import { MAX_OBSERVATIONS } from '../../simulator/native/meraki.js';
import { runSimulation, type RunStats, type SentBatch } from '../../simulator/runner.js';
import { generate, type GeneratedEvent } from '../../simulator/traffic/index.js';
import { VENUE_TEMPLATES, type SimVenue } from '../../simulator/venues.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { waitlessClock } from './clock.js';

/**
 * `npm run simulate -- --native` (docs/simulator.md, "Native mode"): the translation into each
 * vendor's deliveries, checked by hand (formats, signatures with node:crypto) and by the service's
 * own receivers; the fake UniFi controller against the poller's pinned HTTPS client; the sender's
 * retries; and an end-to-end backfill through the real receivers, events sink and UniFi poller.
 */

const log = createLogger('simulator-native-test', 'silent');
const HOUR = 3_600_000;
// A fixed stretch of time: Tuesday 24 March 2026, a whole UTC day (every venue is open some of it).
const FROM = Date.UTC(2026, 2, 24, 0, 0);
const TO = FROM + 24 * HOUR;

const venues: SimVenue[] = VENUE_TEMPLATES.slice(0, 4).map((t, i) => ({
  ...t,
  id: `00000000-0000-4000-8000-00000000000${i}`,
  integrations: Object.fromEntries(t.connectors.map((c, j) => [c, `10000000-0000-4000-8000-0000000000${i}${j}`])),
}));
const byKey = (key: string) => venues.find((v) => v.key === key)!;
const state = new TrafficState({ seed: 9, scale: 0.3, faults: true });
const eventsOf = (venue: SimVenue, c: ConnectorType, from = FROM, to = TO) => generate(c, { from, to }, venue, state);
const link = (venue: SimVenue, connector: ConnectorType, config: Record<string, unknown>, merakiVersion?: 2 | 3): LinkConfig => ({
  integrationId: venue.integrations[connector]!,
  connector,
  config,
  ...(merakiVersion ? { merakiVersion } : {}),
});
const hmac = (key: string, text: string) => createHmac('sha256', key).update(text);
const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
/**
 * What the service's own receiver makes of a delivery: verified with the integration's config
 * (throws as the receiver would answer 401/400), mapped, and each event valid for ingest.
 */
function received(d: Delivery, config: Record<string, unknown>, now = Date.now()) {
  const receiver = RECEIVERS[d.connector] as Receiver;
  const req = { method: 'POST', headers: d.headers(now), rawBody: d.body, now };
  receiver.verify(config, req, () => JSON.parse(d.body));
  const mapped = receiver.map(JSON.parse(d.body), config, now);
  for (const e of mapped.events) {
    const spec = CONNECTORS[d.connector][e.type as keyof (typeof CONNECTORS)[typeof d.connector]];
    expect(spec, `${d.kind}: ${e.type}`).toBeDefined();
    const parsed = spec!.payload.safeParse(e.payload);
    expect(parsed.success, `${d.kind}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
    expect(Number.isNaN(Date.parse(String(e.timestamp))), `${d.kind}: timestamp ${String(e.timestamp)}`).toBe(false);
  }
  return mapped;
}
const wanted = (events: GeneratedEvent[], types: string[]) => events.filter((e) => !e.malformed && types.includes(e.event.type));

describe('native mode: translation into the vendors’ deliveries', () => {
  it('Meraki live v2: one DevicesSeen post per AP per minute with the secret in the body; MT readings, heartbeats and fault twins stay on /ingest', () => {
    const venue = byKey('berlin');
    const events = eventsOf(venue, 'meraki');
    const t = translate('meraki', events, { venue, link: link(venue, 'meraki', { webhook_secret: 's3cret-v2' }, 2), liveFrom: FROM });
    const seen = wanted(events, ['device_seen']);
    expect(seen.length).toBeGreaterThan(50);
    expect(t.deliveries.reduce((n, d) => n + d.events, 0)).toBe(seen.length);
    expect(t.ingest.length + seen.length).toBe(events.length);
    expect(t.ingest.some((e) => e.event.type === 'environment')).toBe(true);
    expect(t.ingest.every((e) => e.malformed || e.event.type !== 'device_seen')).toBe(true);
    const keys = new Set<string>();
    let previous = '';
    for (const d of t.deliveries) {
      expect(d.headers(Date.now())).toEqual({});
      const post = JSON.parse(d.body);
      expect(post).toMatchObject({ version: '2.0', secret: 's3cret-v2', type: 'DevicesSeen' });
      expect(post.data.apMac).toMatch(/^00:18:0a(:[0-9a-f]{2}){3}$/);
      expect(Array.isArray(post.data.apTags) && Array.isArray(post.data.apFloors)).toBe(true);
      const minutes = new Set<number>(post.data.observations.map((o: { seenEpoch: number }) => Math.floor(o.seenEpoch / 60)));
      expect(minutes.size).toBe(1);
      const key = `${[...minutes][0]}|${post.data.apMac}`;
      expect(keys.has(key), key).toBe(false);
      keys.add(key);
      for (const o of post.data.observations) {
        expect(Object.keys(o).sort()).toEqual([
          'clientMac',
          'ipv4',
          'ipv6',
          'location',
          'manufacturer',
          'os',
          'rssi',
          'seenEpoch',
          'seenTime',
          'ssid',
        ]);
        expect(o.rssi).toBeGreaterThan(0);
        expect(new Date(o.seenTime).getTime() / 1000).toBeCloseTo(o.seenEpoch, -0.5);
        expect(o.location).toMatchObject({ x: [], y: [] });
        expect(typeof o.location.lat).toBe('number');
        expect(o.ssid === null || o.ssid === venue.ssid).toBe(true);
      }
      expect(post.data.observations[0].seenTime >= previous).toBe(true);
      previous = post.data.observations[0].seenTime;
      const mapped = received(d, { webhook_secret: 's3cret-v2' });
      expect(mapped.events.length + mapped.ignored).toBe(d.events);
    }
    expect(() => received(t.deliveries[0]!, { webhook_secret: 'another' })).toThrow(/does not match/);
  });

  it('Meraki live v3: one WiFi post per network per minute, latestRecord with the nearest AP in dBm and locations empty', () => {
    const venue = byKey('sydney');
    const events = eventsOf(venue, 'meraki');
    const t = translate('meraki', events, { venue, link: link(venue, 'meraki', { webhook_secret: 's3cret-v3' }, 3), liveFrom: FROM });
    const minutes = new Set<number>();
    for (const d of t.deliveries) {
      const post = JSON.parse(d.body);
      expect(post).toMatchObject({ version: '3.0', secret: 's3cret-v3', type: 'WiFi', data: { networkId: expect.stringMatching(/^N_/) } });
      const ms = new Set<number>(
        post.data.observations.map((o: { latestRecord: { time: string } }) => Math.floor(Date.parse(o.latestRecord.time) / 60_000)),
      );
      expect(ms.size).toBe(1);
      expect(minutes.has([...ms][0]!)).toBe(false);
      minutes.add([...ms][0]!);
      for (const o of post.data.observations) {
        expect(o.latestRecord.nearestApRssi).toBeLessThan(0);
        expect(o.latestRecord.nearestApMac).toMatch(/^00:18:0a/);
        expect(o.locations).toEqual([]);
        expect(o).not.toHaveProperty('seenEpoch');
      }
      const mapped = received(d, { webhook_secret: 's3cret-v3' });
      expect(mapped.events.length + mapped.ignored).toBe(post.data.observations.length);
      const times = new Set(post.data.observations.map((o: { latestRecord: { time: string } }) => o.latestRecord.time));
      for (const e of mapped.events) expect(times.has(e.timestamp)).toBe(true);
    }
    expect(t.deliveries.reduce((n, d) => n + d.events, 0)).toBe(wanted(events, ['device_seen']).length);
  });

  it('Meraki history: large v3 posts of at most 1,000 observations spanning many minutes, whatever the live version', () => {
    const venue = byKey('berlin');
    const big = new TrafficState({ seed: 9, scale: 1, faults: false });
    const events = generate('meraki', { from: FROM, to: TO }, venue, big);
    const t = translate('meraki', events, { venue, link: link(venue, 'meraki', { webhook_secret: 'x' }, 2), liveFrom: TO });
    const seen = wanted(events, ['device_seen']).length;
    expect(seen).toBeGreaterThan(MAX_OBSERVATIONS);
    expect(t.deliveries.length).toBe(Math.ceil(seen / MAX_OBSERVATIONS));
    for (const d of t.deliveries) {
      const post = JSON.parse(d.body);
      expect(post.version).toBe('3.0');
      expect(post.data.observations.length).toBeLessThanOrEqual(MAX_OBSERVATIONS);
      const times = post.data.observations.map((o: { latestRecord: { time: string } }) => o.latestRecord.time);
      expect(new Set(times.map((x: string) => x.slice(0, 16))).size).toBeGreaterThan(1);
    }
  });

  it('Square: one payment webhook per event, signed base64(HMAC-SHA256(key, notification_url + raw body))', () => {
    const venue = byKey('tokyo');
    const events = eventsOf(venue, 'square');
    const url = notificationUrl('http://127.0.0.1:8080', venue.integrations.square!);
    expect(url).toBe(`https://127.0.0.1:8080/hooks/${venue.integrations.square}`);
    const config = { webhook_signature_key: 'sq-key', notification_url: url, location_id: 'LSIMTOKYO' };
    const t = translate('square', events, { venue, link: link(venue, 'square', config), liveFrom: FROM });
    const payments = wanted(events, ['transaction']);
    expect(payments.length).toBeGreaterThan(5);
    expect(t.deliveries).toHaveLength(payments.length);
    payments.forEach((e, i) => {
      const d = t.deliveries[i]!;
      const headers = d.headers(Date.now());
      const expected = hmac('sq-key', url + d.body).digest('base64');
      expect(same(headers['x-square-hmacsha256-signature']!, expected)).toBe(true);
      expect(headers['x-square-hmacsha256-signature']).not.toBe(hmac('other', url + d.body).digest('base64'));
      const body = JSON.parse(d.body);
      expect(body).toMatchObject({
        type: e.event.payload.event_type,
        event_id: e.event.payload.event_id,
        created_at: e.event.timestamp,
        data: {
          type: 'payment',
          id: e.event.payload.payment_id,
          object: {
            payment: {
              id: e.event.payload.payment_id,
              status: e.event.payload.status,
              location_id: 'LSIMTOKYO',
              amount_money: e.event.payload.amount_money,
            },
          },
        },
      });
      expect(body.merchant_id).toMatch(/^MLSIM/);
      const mapped = received(d, config);
      expect(mapped.events).toHaveLength(1);
      expect(mapped.events[0]).toMatchObject({ type: 'transaction', event_id: e.event.payload.event_id, timestamp: e.event.timestamp });
    });
    expect(() => received(t.deliveries[0]!, { ...config, notification_url: 'https://elsewhere.example/hooks/x' })).toThrow(
      /does not match/,
    );
    expect(t.ingest.every((e) => e.malformed || e.event.type === 'heartbeat')).toBe(true);
  });

  it('Density: one count webhook per person through a doorway, with the configured header; occupancy stays on /ingest', () => {
    const venue = byKey('berlin');
    const events = eventsOf(venue, 'density');
    const config = { webhook_header_name: 'X-Density-Token', webhook_header_value: 'dens-value' };
    const t = translate('density', events, { venue, link: link(venue, 'density', config), liveFrom: FROM });
    const crossings = wanted(events, ['entry', 'exit']);
    expect(t.deliveries).toHaveLength(crossings.length);
    crossings.forEach((e, i) => {
      const d = t.deliveries[i]!;
      expect(d.headers(Date.now())).toEqual({ 'x-density-token': 'dens-value' });
      const body = JSON.parse(d.body);
      expect(body).toMatchObject({
        space_id: e.event.payload.space_id,
        doorway_id: e.event.payload.doorway_id,
        direction: e.event.type === 'entry' ? 1 : -1,
        count: e.event.payload.count,
      });
      expect(body.space_id).toMatch(/^spc_/);
      expect(body.doorway_id).toMatch(/^drw_/);
      const mapped = received(d, config);
      expect(mapped.events).toEqual([expect.objectContaining({ type: e.event.type, timestamp: e.event.timestamp })]);
    });
    expect(() => received(t.deliveries[0]!, { ...config, webhook_header_value: 'other' })).toThrow(/does not match/);
    expect(t.ingest.some((e) => e.event.type === 'occupancy')).toBe(true);
  });

  it('Verkada: SV readings as sensor webhooks, Verkada-Signature ts|hex HMAC-SHA256(secret, body|ts) signed at send time', () => {
    const venue = byKey('sydney');
    const events = eventsOf(venue, 'verkada');
    const t = translate('verkada', events, {
      venue,
      link: link(venue, 'verkada', { webhook_secret: 'vk-secret', org_id: 'sim-sydney-org' }),
      liveFrom: FROM,
    });
    const readings = wanted(events, ['environment']);
    // One sensor alert per reading with a telemetry key: temperature, humidity, CO₂, noise.
    expect(t.deliveries).toHaveLength(readings.length * 4);
    const d = t.deliveries[0]!;
    const now = Date.now();
    const header = d.headers(now)['verkada-signature']!;
    const [ts, hex] = header.split('|');
    expect(Number(ts)).toBe(Math.floor(now / 1000));
    expect(same(hex!, hmac('vk-secret', `${d.body}|${ts}`).digest('hex'))).toBe(true);
    // A retry a minute later is signed afresh.
    expect(d.headers(now + 60_000)['verkada-signature']!.split('|')[0]).toBe(String(Math.floor(now / 1000) + 60));
    const body = JSON.parse(d.body);
    expect(body).toMatchObject({ org_id: 'sim-sydney-org', created_at: Math.floor(readings[0]!.ts / 1000) });
    expect(typeof body.webhook_type).toBe('string');
    expect(typeof body.webhook_id).toBe('string');
    expect(body.data).toMatchObject({
      reading: 'temperature',
      most_extreme_value: readings[0]!.event.payload.temperature,
      device_id: readings[0]!.event.payload.device_id,
    });
    expect(new Set(t.deliveries.map((x) => JSON.parse(x.body).webhook_id)).size).toBe(t.deliveries.length);
    const config = { webhook_secret: 'vk-secret', org_id: 'sim-sydney-org' };
    const metrics = new Map<string, number>();
    for (const x of t.deliveries.slice(0, 40)) {
      const mapped = received(x, config);
      expect(mapped.events).toHaveLength(1);
      for (const [k, v] of Object.entries(mapped.events[0]!.payload)) if (typeof v === 'number') metrics.set(k, v);
    }
    expect([...metrics.keys()].sort()).toEqual(['co2', 'humidity', 'noise', 'temperature']);
    // A delivery held back past Verkada's 60 s is refused: hence signed at send time.
    expect(() => received({ ...d, headers: () => d.headers(now - 120_000) }, config, now)).toThrow(/server clock/);
    // People counts and camera occupancy are poll-only at Verkada: they stay on /ingest.
    expect(t.ingest.some((e) => e.event.type === 'entry')).toBe(true);
    expect(t.ingest.every((e) => e.malformed || e.event.type !== 'environment')).toBe(true);
  });

  it('UniFi: each sighting is a stat/sta client record; disconnects and heartbeats stay on /ingest', () => {
    const venue = byKey('tokyo');
    const events = eventsOf(venue, 'unifi');
    const t = translate('unifi', events, { venue, link: link(venue, 'unifi', { site: 'sim-tokyo' }), liveFrom: FROM });
    const seen = wanted(events, ['device_seen']);
    expect(t.records).toHaveLength(seen.length);
    expect(t.deliveries).toEqual([]);
    for (const r of t.records!) {
      expect(Object.keys(r).sort()).toEqual(['ap_mac', 'essid', 'first_seen', 'is_guest', 'last_seen', 'mac', 'rssi']);
      expect(r.rssi).toBeLessThan(0);
      expect(r.last_seen).toBeGreaterThanOrEqual(r.first_seen);
    }
    expect(t.ingest.some((e) => e.event.type === 'device_left')).toBe(true);
  });
});

describe('native mode: the fake UniFi controller', () => {
  let dir: string;
  let controller: FakeUnifiController;
  const now = Date.now();
  const rec = (mac: string, lastSeenS: number): UnifiRecord => ({
    mac,
    ap_mac: '00:18:0a:00:00:01',
    essid: 'Roasters WiFi',
    rssi: -60,
    first_seen: lastSeenS - 600,
    last_seen: lastSeenS,
    is_guest: true,
  });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sim-native-'));
    controller = await FakeUnifiController.start({ certDir: dir, log, recentMs: 5 * 60_000 });
    controller.addAccount('sim-readonly-tokyo', 'pw-tokyo', 'sim-tokyo');
  });
  afterAll(async () => {
    await controller?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('makes its certificate once (key 0600) and pins the same fingerprint on later runs', () => {
    const first = ensureCertificate(dir);
    expect(first.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(first.sha256).toBe(controller.certificateSha256);
    expect(statSync(first.keyPath).mode & 0o777).toBe(0o600);
    expect(ensureCertificate(dir).sha256).toBe(first.sha256);
  });

  it('logs in the configured account over pinned https, refuses other credentials, and serves each record once plus the clients of the last minutes', async () => {
    const url = (path: string) => new URL(controller.url + path);
    const pin = controller.certificateSha256;
    // A wrong pin is refused by the poller's client before anything is sent.
    await expect(
      httpsRequest({ method: 'GET', url: url('/api/s/sim-tokyo/stat/sta'), pin: '0'.repeat(64), timeoutMs: 5000 }),
    ).rejects.toThrow(/does not match the pinned/);
    const bad = await httpsRequest({
      method: 'POST',
      url: url('/api/login'),
      json: { username: 'sim-readonly-tokyo', password: 'nope' },
      pin,
      timeoutMs: 5000,
    });
    expect(bad.status).toBe(400);
    const anonymous = await httpsRequest({ method: 'GET', url: url('/api/s/sim-tokyo/stat/sta'), pin, timeoutMs: 5000 });
    expect(anonymous.status).toBe(401);
    const login = await httpsRequest({
      method: 'POST',
      url: url('/api/login'),
      json: { username: 'sim-readonly-tokyo', password: 'pw-tokyo' },
      pin,
      timeoutMs: 5000,
    });
    expect(login.status).toBe(200);
    const cookie = String(login.headers['set-cookie']?.[0] ?? '').split(';')[0]!;
    expect(cookie).toMatch(/^unifises=/);
    const poll = async (site = 'sim-tokyo') => {
      const res = await httpsRequest({ method: 'GET', url: url(`/api/s/${site}/stat/sta`), headers: { cookie }, pin, timeoutMs: 5000 });
      return { status: res.status, body: jsonOf<{ meta: { rc: string }; data: UnifiRecord[] }>(res, 'stat/sta') };
    };
    expect((await poll('default')).status).toBe(400);

    const s = Math.floor(now / 1000);
    // Backfill history (hours old) and two recent sightings of one client.
    controller.add('sim-tokyo', [
      rec('aa:00:00:00:00:01', s - 7200),
      rec('aa:00:00:00:00:02', s - 3600),
      rec('aa:00:00:00:00:03', s - 120),
      rec('aa:00:00:00:00:03', s - 60),
    ]);
    expect(controller.pending()).toBe(4);
    const first = await poll();
    expect(first.status).toBe(200);
    expect(first.body.meta.rc).toBe('ok');
    expect(first.body.data.map((r) => r.last_seen)).toEqual([s - 7200, s - 3600, s - 120, s - 60]);
    expect(controller.pending()).toBe(0);
    // The next poll lists only the clients of the last few minutes (their latest record), as a controller would.
    const second = await poll();
    expect(second.body.data).toEqual([rec('aa:00:00:00:00:03', s - 60)]);
    controller.add('sim-tokyo', [rec('aa:00:00:00:00:04', s)]);
    expect((await poll()).body.data.map((r) => r.mac)).toEqual(['aa:00:00:00:00:03', 'aa:00:00:00:00:04']);
    expect(await controller.waitServed(100)).toBe(true);
    expect(controller.stats).toMatchObject({ logins: 1, refusedLogins: 1, served: 5 });
  });
});

describe('native mode end to end: --native --backfill 2h --no-live against a real api, events sink and UniFi poller', () => {
  let api: RunningApi;
  let sink: RunningEventsSink;
  let pollers: RunningPollers;
  let dir: string;
  let fleet: Fleet;
  let native: NativeLinks;
  let stats: RunStats;
  const batches: SentBatch[] = [];
  let start: number;
  let stopFlag = false;

  beforeAll(async () => {
    // Its own topics (as the pollers' suites do), so this file's sink reads only its own events.
    const prefix = `${testConfig().KAFKA_TOPIC_PREFIX}.simnative${randomUUID().slice(0, 6)}`;
    const cfg = testConfig({ KAFKA_TOPIC_PREFIX: prefix });
    api = await startApi(cfg);
    const { kafka, db, ch, producer, topics } = api.services;
    sink = await runEventsSink(kafka, {
      groupId: `${prefix}.sink.events`,
      partitions: cfg.KAFKA_PARTITIONS,
      ch,
      db,
      producer,
      topics,
      log,
      batchRows: 5000,
      batchMs: 100,
      drainMs: 5000,
    });
    // The pipeline's UniFi poller as apps/pipeline runs it, polling every second instead of every minute.
    pollers = startPollers({
      db,
      keyring: keyringFromConfig(cfg),
      ingest: {
        db,
        publisher: api.services.publisher,
        topic: topics.events,
        reportsTopic: derivedTopicNames(prefix).ingestReports,
        pseudonyms: new Pseudonyms(cfg.PSEUDONYM_KEY),
        throughput: new Throughput(api.services.redis),
        log,
      },
      log,
      vendors: { unifi: unifiPoller },
      intervals: { unifi: 1000 },
      listIntervalMs: 300,
      renewMs: 200,
      leaseMs: 3000,
      requestTimeoutMs: 3000,
      backoffBaseMs: 300,
      maxBackoffMs: 1000,
      stopGraceMs: 1000,
    });
    dir = mkdtempSync(join(tmpdir(), 'sim-native-e2e-'));
    const client = new ApiClient({ url: api.url, log });
    fleet = await setUpFleet({ client, log, operatorName: 'Sim Native', plan: 'pro', venues: 4, adminSecret: () => cfg.ADMIN_SECRET });
    // A fresh fleet: no receiver has its integrations cached, so no need to wait for the cache to expire.
    native = await NativeLinks.start({
      client,
      log,
      venues: fleet.venues,
      url: api.url,
      certDir: dir,
      stopping: () => stopFlag,
      settleMs: 0,
    });
    // Two hours that end at the latest full hour when Berlin, Tokyo and Sydney are all open (their
    // Meraki, Density, Square and UniFi traffic); New York's Verkada sensors report day and night.
    // At least 15 minutes ago: the live test plays the 10 minutes after it, and the api refuses
    // events more than 5 minutes ahead of its clock (this failed when run just after the hour).
    const traffic = new TrafficState({ seed: 21, scale: 0.3, faults: false });
    start = Math.floor((Date.now() - 15 * 60_000) / HOUR) * HOUR;
    const open = (t: number) =>
      ['berlin', 'tokyo', 'sydney'].every((k) =>
        openBetween(
          traffic,
          fleet.venues.find((v) => v.key === k)!,
          t - 2 * HOUR,
          t,
        ),
      );
    while (!open(start) && start > Date.now() - 3 * 24 * HOUR) start -= HOUR;
    stats = await runSimulation({
      client,
      venues: fleet.venues,
      traffic,
      log,
      start,
      backfillFrom: start - 2 * HOUR,
      live: false,
      stopping: () => false,
      native,
      onBatch: (b) => batches.push(b),
    });
    // The poller fetches what the controller still holds (every second here; once a minute in the pipeline).
    await native.controller!.waitServed(20_000);
  }, 120_000);

  afterAll(async () => {
    // Later suites (and pipeline processes they start) must not poll this file's controller.
    if (fleet) {
      const ids = fleet.venues.flatMap((v) => Object.values(v.integrations));
      await api.services.db.query('UPDATE integrations SET is_active = false WHERE id = ANY($1::uuid[])', [ids]);
    }
    await pollers?.stop();
    await native?.close(0);
    await sink?.stop();
    await api?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('delivers every native connector the vendor’s way, none refused, and keeps Aruba and MyWiFi on /ingest', () => {
    expect(native.refusals).toEqual([]);
    expect(stats.unexpected).toEqual([]);
    for (const c of ['meraki', 'square', 'density', 'verkada'] as const) {
      const n = native.stats[c]!;
      expect(n.deliveries, c).toBeGreaterThan(0);
      expect(n.refused, c).toBe(0);
      expect(n.rejected, c).toBe(0);
      expect(n.accepted, c).toBeGreaterThan(0);
    }
    expect(native.stats.unifi!.records).toBeGreaterThan(0);
    expect(native.controller!.pending()).toBe(0);
    expect(native.controller!.stats.served).toBe(native.stats.unifi!.records);
    expect(native.stats.aruba).toBeUndefined();
    expect(native.stats.mywifi).toBeUndefined();
    // Meraki's history went as large v3 posts: fewer posts than minutes with sightings.
    expect(native.stats.meraki!.deliveries).toBeLessThan(native.stats.meraki!.accepted / 2);
    expect(native.describe()).toMatch(/^native: .*meraki .* posts \(0 refused\).*unifi .* records, .* served/);
    for (const b of batches) expect(b.answer.rejected, `${b.venue.key}/${b.connector}`).toBe(0);
  });

  it('lands in ClickHouse: what the receivers and the poller took plus what stayed on /ingest, per connector', async () => {
    const expected: Record<string, number> = {};
    for (const [c, s] of Object.entries(stats.byConnector)) expected[c] = (expected[c] ?? 0) + s.accepted;
    for (const [c, s] of Object.entries(native.stats))
      expected[c] = (expected[c] ?? 0) + (c === 'unifi' ? native.controller!.stats.served : s.accepted);
    const venueIds = fleet.venues.map((v) => v.id);
    const stored = async () =>
      Object.fromEntries(
        (
          await chRows<{ connector_type: string; n: number }>(
            api.services.ch,
            chsql`SELECT connector_type, toUInt32(uniqExact(event_id)) AS n FROM events WHERE has(${venueIds}, toString(venue_id)) GROUP BY connector_type`,
          )
        ).map((r) => [r.connector_type, Number(r.n)]),
      );
    const deadline = Date.now() + 30_000;
    let got = await stored();
    while (JSON.stringify(Object.entries(got).sort()) !== JSON.stringify(Object.entries(expected).sort()) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 300));
      got = await stored();
    }
    expect(got).toEqual(expected);
    // The polled UniFi sightings and the webhooks' events are stored under the vendor's times, inside the backfill.
    const [range] = await chRows<{ lo: string; hi: string }>(
      api.services.ch,
      chsql`SELECT toString(min(ts)) AS lo, toString(max(ts)) AS hi FROM events WHERE has(${venueIds}, toString(venue_id)) AND event_type != 'heartbeat'`,
    );
    expect(Date.parse(`${range!.lo.replace(' ', 'T')}Z`)).toBeGreaterThanOrEqual(start - 2 * HOUR - 1000);
    expect(Date.parse(`${range!.hi.replace(' ', 'T')}Z`)).toBeLessThan(start);
  });
  it('live: Berlin posts Meraki v2 once per AP per minute, Sydney v3 once per network per minute, all taken', async () => {
    // Ten minutes of the same afternoon, played at two minutes a second.
    const venues = fleet.venues
      .filter((v) => v.key === 'berlin' || v.key === 'sydney')
      .map((v) => ({ ...v, connectors: ['meraki' as const] }));
    const posts: Delivery[] = [];
    const deliver = native.sender.deliver.bind(native.sender);
    native.sender.deliver = async (d) => {
      posts.push(d);
      return deliver(d);
    };
    const began = Date.now();
    const clock = () => start + (Date.now() - began) * 120;
    const traffic = new TrafficState({ seed: 21, scale: 1, faults: false, liveFrom: start, liveRate: 1 });
    const live = await runSimulation({
      client: new ApiClient({ url: api.url, log, key: fleet.state.operator.key }),
      venues,
      traffic,
      log,
      start,
      live: true,
      liveDurationMs: 10 * 60_000,
      now: clock,
      tickMs: 100,
      flushMs: 20_000,
      stopping: () => false,
      native,
    });
    const end = clock();
    native.sender.deliver = deliver;
    expect(native.refusals).toEqual([]);
    expect(live.unexpected).toEqual([]);
    const byVenue = (key: string) =>
      posts.filter((d) => d.integrationId === fleet.venues.find((v) => v.key === key)!.integrations.meraki).map((d) => JSON.parse(d.body));
    const berlin = byVenue('berlin');
    const sydney = byVenue('sydney');
    expect(berlin.length).toBeGreaterThan(3);
    expect(sydney.length).toBeGreaterThan(3);
    const minuteOf = (iso: string) => Math.floor(Date.parse(iso) / 60_000);
    const v2 = new Set<string>();
    for (const p of berlin) {
      expect(p.version).toBe('2.0');
      const minutes = new Set(p.data.observations.map((o: { seenTime: string }) => minuteOf(o.seenTime)));
      expect(minutes.size).toBe(1);
      const key = `${p.data.apMac}|${[...minutes][0]}`;
      expect(v2.has(key), key).toBe(false);
      v2.add(key);
    }
    const v3 = new Set<number>();
    for (const p of sydney) {
      expect(p.version).toBe('3.0');
      const minutes = new Set<number>(p.data.observations.map((o: { latestRecord: { time: string } }) => minuteOf(o.latestRecord.time)));
      expect(minutes.size).toBe(1);
      expect(v3.has([...minutes][0]!)).toBe(false);
      v3.add([...minutes][0]!);
    }
    for (const p of [...berlin, ...sydney]) {
      for (const o of p.data.observations) {
        const t = Date.parse(o.seenTime ?? o.latestRecord.time);
        expect(t).toBeGreaterThanOrEqual(start);
        expect(t).toBeLessThan(end);
      }
    }
  });
  it('a stop part-way leaves the stream where it was; the next run re-sends the batch and nothing is stored twice', async () => {
    // The two hours before the backfill above, Verkada only (its SV sensors report day and night).
    const to = start - 2 * HOUR;
    const from = to - 2 * HOUR;
    const venues = fleet.venues.filter((v) => v.connectors.includes('verkada')).map((v) => ({ ...v, connectors: ['verkada' as const] }));
    const traffic = () => new TrafficState({ seed: 21, scale: 0.3, faults: false });
    const deliver = native.sender.deliver.bind(native.sender);
    let delivered = 0;
    native.sender.deliver = async (d) => {
      const answer = await deliver(d);
      if (++delivered >= 40) stopFlag = true;
      return answer;
    };
    const client = new ApiClient({ url: api.url, log, key: fleet.state.operator.key });
    let progress: Record<string, number> = {};
    try {
      await runSimulation({
        client,
        venues,
        traffic: traffic(),
        log,
        start: to,
        backfillFrom: from,
        live: false,
        stopping: () => stopFlag,
        native,
        onProgress: (p) => (progress = p),
      });
    } finally {
      native.sender.deliver = deliver;
      stopFlag = false;
    }
    expect(delivered).toBeGreaterThanOrEqual(40);
    expect(delivered).toBeLessThan(100);
    // No stream got past a batch it did not finish.
    for (const v of venues) expect(progress[`${v.key}/verkada`] ?? from, v.key).toBe(from);
    const resumed = await runSimulation({
      client,
      venues,
      traffic: traffic(),
      log,
      start: to,
      backfillFrom: from,
      sentUntil: progress,
      live: false,
      stopping: () => false,
      native,
    });
    expect(resumed.unexpected).toEqual([]);
    // What the window holds: one sensor alert per reading, the rest (counts, occupancy, heartbeats) on /ingest.
    let webhooks = 0;
    let ingest = 0;
    for (const v of venues) {
      const events = generate('verkada', { from, to }, v, traffic());
      const t = translate('verkada', events, { venue: v, link: native.link(v, 'verkada')!, liveFrom: to });
      webhooks += t.deliveries.length;
      ingest += t.ingest.length;
    }
    const ids = venues.map((v) => v.id);
    const count = async () =>
      (
        await chRows<{ kind: string; n: number; u: number }>(
          api.services.ch,
          chsql`SELECT if(event_type = 'environment', 'webhook', 'ingest') AS kind, toUInt32(count()) AS n, toUInt32(uniqExact(event_id)) AS u FROM events
                WHERE has(${ids}, toString(venue_id)) AND connector_type = 'verkada' AND ts >= toDateTime(${Math.floor(from / 1000)}, 'UTC') AND ts < toDateTime(${Math.floor(to / 1000)}, 'UTC')
                GROUP BY kind ORDER BY kind`,
        )
      ).map((r) => ({ kind: r.kind, n: Number(r.n), u: Number(r.u) }));
    const want = [
      { kind: 'ingest', n: ingest, u: ingest },
      { kind: 'webhook', n: webhooks, u: webhooks },
    ];
    const deadline = Date.now() + 20_000;
    let got = await count();
    while (JSON.stringify(got) !== JSON.stringify(want) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 300));
      got = await count();
    }
    expect(got).toEqual(want);
  });
  it('registers the native config (secrets redacted on the way out), and a later run without --native turns UniFi polling off again', async () => {
    const tokyo = fleet.venues.find((v) => v.key === 'tokyo')!;
    const path = `/api/venues/${tokyo.id}/integrations/${tokyo.integrations.unifi}`;
    const client = new ApiClient({ url: api.url, log, key: fleet.state.operator.key });
    const before = (await client.call<{ config: Record<string, unknown> }>('GET', path)).body.config;
    expect(before).toMatchObject({
      controller_url: native.controller!.url,
      certificate_sha256: native.controller!.certificateSha256,
      site: 'sim-tokyo',
      polling: true,
      password: '[REDACTED]',
    });
    const berlin = fleet.venues.find((v) => v.key === 'berlin')!;
    const square = (
      await client.call<{ config: Record<string, unknown> }>('GET', `/api/venues/${berlin.id}/integrations/${berlin.integrations.square}`)
    ).body.config;
    expect(square).toMatchObject({
      notification_url: `https://${new URL(api.url).host}/hooks/${berlin.integrations.square}`,
      webhook_signature_key: '[REDACTED]',
    });
    const again = await setUpFleet({
      client,
      log,
      operatorName: 'Sim Native',
      plan: 'pro',
      venues: 4,
      adminSecret: () => api.services.cfg.ADMIN_SECRET,
      state: fleet.state,
    });
    expect(again.created).toEqual({ operator: false, venues: 0, zones: 0, integrations: 0 });
    expect((await client.call<{ config: Record<string, unknown> }>('GET', path)).body.config).toMatchObject({ polling: false });
  });
});

describe('native mode: the webhook sender', () => {
  it('waits Retry-After on 429 and resends (per integration), resends after a 503, counts a 401 as refused, and stops the run on 404', async () => {
    const seen: Array<{ path: string; at: number; signature: string | undefined }> = [];
    // The sender's waits move this clock on instead of taking real time; the server reads it too.
    const clock = waitlessClock();
    let answers: Array<{ status: number; headers?: Record<string, string>; body: unknown }> = [];
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push({ path: req.url ?? '', at: clock.now(), signature: req.headers['verkada-signature'] as string | undefined });
        const a = answers.shift() ?? { status: 200, body: { accepted: 1, rejected: 0, ignored: 0 } };
        res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
        res.end(JSON.stringify(a.body));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const sender = new HookSender({ url, log, clock });
      let signedAt: number[] = [];
      const d: Delivery = {
        integrationId: '20000000-0000-4000-8000-000000000001',
        connector: 'verkada',
        body: '{"webhook_type":"sensor_alert"}',
        headers: (now) => {
          signedAt.push(now);
          return { 'verkada-signature': `${Math.floor(now / 1000)}|00` };
        },
        events: 1,
        kind: 'verkada sensor_alert',
      };
      answers = [
        { status: 429, headers: { 'retry-after': '1' }, body: { error: 'rate limited' } },
        { status: 503, headers: { 'retry-after': '1' }, body: { error: 'kafka' } },
      ];
      const began = clock.now();
      expect(await sender.deliver(d)).toEqual({ status: 200, accepted: 1, rejected: 0, ignored: 0 });
      expect(seen).toHaveLength(3);
      expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(950);
      expect(seen[2]!.at - seen[1]!.at).toBeGreaterThanOrEqual(950);
      expect(clock.now() - began).toBeGreaterThanOrEqual(1900);
      expect(seen.every((x) => x.path === `/hooks/${d.integrationId}`)).toBe(true);
      // Signed again for each attempt.
      expect(signedAt).toHaveLength(3);
      expect(sender.stats).toMatchObject({ requests: 3, rateLimited: 1, retried: 1 });
      signedAt = [];
      answers = [{ status: 401, body: { error: 'the Verkada-Signature header does not match' } }];
      const refused = await sender.deliver(d);
      expect(refused.refused).toMatch(/^401 the Verkada-Signature header does not match/);
      answers = [{ status: 404, body: { error: 'integration not found' } }];
      await expect(sender.deliver(d)).rejects.toBeInstanceOf(ApiError);
      // A stop while waiting for the rate limit drops the delivery at once.
      let stop = false;
      const stopping = new HookSender({ url, log, stopping: () => stop });
      answers = [{ status: 429, headers: { 'retry-after': '30' }, body: {} }];
      const pending = stopping.deliver(d);
      setTimeout(() => (stop = true), 300);
      const t = Date.now();
      await expect(pending).rejects.toThrow(/stopped/);
      expect(Date.now() - t).toBeLessThan(3000);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('holds back a Meraki minute still under way in live traffic (one post per AP or network per minute)', () => {
    const fake = Object.create(NativeLinks.prototype) as NativeLinks;
    const venue = byKey('berlin');
    (fake as unknown as { links: Map<string, LinkConfig> }).links = new Map([[venue.integrations.meraki!, link(venue, 'meraki', {}, 3)]]);
    const at = (ts: number) => ({ ts, event: { type: 'device_seen', timestamp: new Date(ts).toISOString(), payload: {} } });
    const m = Date.UTC(2026, 2, 24, 12, 0);
    const buffer = [at(m - 30_000), at(m - 1), at(m), at(m + 20_000)];
    expect(fake.ready(venue, 'meraki', buffer, m + 30_000)).toBe(2);
    expect(fake.ready(venue, 'meraki', buffer, m + 60_000)).toBe(4);
    expect(fake.ready(venue, 'square', buffer, m + 30_000)).toBe(4);
  });
});
