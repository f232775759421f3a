import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONNECTOR_TYPES } from '../../lib/events/vocabulary.js';
import { createLogger } from '../../lib/logger.js';
import { limiterFor } from '../../apps/api/middleware/rate-limit.js';
import { ApiClient } from '../../simulator/client.js';
import { loadState, saveState, setUpFleet, type Fleet } from '../../simulator/fleet.js';
import { TrafficState } from '../../simulator/model.js';
import { runSimulation, type RunStats, type SentBatch } from '../../simulator/runner.js';
import { localDate, localParts, zonedTime, addDays } from '../../simulator/time.js';
import { VENUE_TEMPLATES } from '../../simulator/venues.js';
import { startApi, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { waitlessClock } from './clock.js';
import { newOperator } from '../support/tenants.js';

const log = createLogger('simulator-test', 'silent');
const DAY = 86_400_000;

describe('fleet simulator against a real API', () => {
  let api: RunningApi;
  let dir: string;
  const admin = () => api.services.cfg.ADMIN_SECRET;
  const newClient = () => new ApiClient({ url: api.url, log });

  beforeAll(async () => {
    api = await startApi();
    dir = mkdtempSync(join(tmpdir(), 'simulator-'));
  });
  afterAll(async () => {
    await api?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('set-up', () => {
    let first: Fleet;

    it('creates an operator with four venues in four time zones, their zones with capacities, and all seven connector types', async () => {
      first = await setUpFleet({ client: newClient(), log, operatorName: 'Sim Setup', plan: 'pro', venues: 4, adminSecret: admin });
      expect(first.created).toEqual({ operator: true, venues: 4, zones: 16, integrations: 14 });
      const key = first.state.operator.key;
      const venues = await request(`${api.url}/api/venues`, { key });
      expect(venues.body.total).toBe(4);
      expect(venues.body.data.map((v: { timezone: string }) => v.timezone).sort()).toEqual([
        'America/New_York',
        'Asia/Tokyo',
        'Australia/Sydney',
        'Europe/Berlin',
      ]);
      const types = new Set<string>();
      for (const v of first.venues) {
        const template = VENUE_TEMPLATES.find((t) => t.key === v.key)!;
        const zones = await request(`${api.url}/api/venues/${v.id}/zones`, { key });
        expect(zones.body.data.map((z: { slug: string; type: string; capacity: number }) => [z.slug, z.type, z.capacity]).sort()).toEqual(
          template.zones.map((z) => [z.slug, z.type, z.capacity]).sort(),
        );
        const integrations = await request(`${api.url}/api/venues/${v.id}/integrations`, { key });
        expect(integrations.status).toBe(200);
        for (const i of integrations.body.data) {
          types.add(i.connector_type);
          expect(i.is_active).toBe(true);
          expect(v.integrations[i.connector_type as keyof typeof v.integrations]).toBe(i.id);
          // Secrets were sent and are redacted on the way out.
          expect(JSON.stringify(i.config)).not.toMatch(/fake/);
        }
      }
      expect([...types].sort()).toEqual([...CONNECTOR_TYPES].sort());
      const usage = await request(`${api.url}/api/usage`, { key });
      expect(usage.body.plan).toBe('pro');
    });

    it('reuses everything on a second run, from the state file or from the key alone', async () => {
      const path = join(dir, 'state.json');
      saveState(path, first.state);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      const again = await setUpFleet({
        client: newClient(),
        log,
        operatorName: 'Sim Setup',
        plan: 'pro',
        venues: 4,
        adminSecret: admin,
        state: loadState(path),
      });
      expect(again.created).toEqual({ operator: false, venues: 0, zones: 0, integrations: 0 });
      expect(again.venues.map((v) => [v.id, v.integrations])).toEqual(first.venues.map((v) => [v.id, v.integrations]));
      const byKey = await setUpFleet({
        client: newClient(),
        log,
        operatorName: 'Sim Setup',
        plan: 'pro',
        venues: 4,
        adminSecret: admin,
        key: first.state.operator.key,
      });
      expect(byKey.created).toEqual({ operator: false, venues: 0, zones: 0, integrations: 0 });
      expect(byKey.venues.map((v) => v.id)).toEqual(first.venues.map((v) => v.id));
      const venues = await request(`${api.url}/api/venues`, { key: first.state.operator.key });
      expect(venues.body.total).toBe(4);
    });

    it('replaces a rotated key with the admin secret and keeps the fleet', async () => {
      const rotated = await request(`${api.url}/api/keys/rotate`, { method: 'POST', key: first.state.operator.key });
      expect(rotated.status).toBe(200);
      const again = await setUpFleet({
        client: newClient(),
        log,
        operatorName: 'Sim Setup',
        plan: 'pro',
        venues: 4,
        adminSecret: admin,
        state: first.state,
      });
      expect(again.state.operator.id).toBe(first.state.operator.id);
      expect(again.state.operator.key).not.toBe(first.state.operator.key);
      expect(again.created).toEqual({ operator: false, venues: 0, zones: 0, integrations: 0 });
      expect((await request(`${api.url}/api/venues`, { key: again.state.operator.key })).body.total).toBe(4);
      first = again;
    });

    it('never reuses another operator’s venues, and another operator cannot see or feed the fleet', async () => {
      const other = await setUpFleet({
        client: newClient(),
        log,
        operatorName: 'Sim Other',
        plan: 'starter',
        venues: 2,
        adminSecret: admin,
      });
      expect(other.created).toMatchObject({ operator: true, venues: 2 });
      const ours = (await request(`${api.url}/api/venues`, { key: first.state.operator.key })).body.data.map((v: { id: string }) => v.id);
      expect(ours).toHaveLength(4);
      for (const v of other.venues) expect(ours).not.toContain(v.id);
      const stranger = await newOperator(api, 'pro');
      expect((await request(`${api.url}/api/venues`, { key: stranger.key })).body.total).toBe(0);
      const intrusion = await request(`${api.url}/ingest`, {
        key: stranger.key,
        json: {
          venue_id: first.venues[0]!.id,
          connector_type: 'meraki',
          events: [{ type: 'heartbeat', timestamp: new Date().toISOString(), payload: {} }],
        },
      });
      expect(intrusion.status).toBe(403);
    });
  });

  describe('a three-day backfill with faults', () => {
    let fleet: Fleet;
    const batches: SentBatch[] = [];
    let stats: RunStats;
    let start: number;
    let backfillFrom: number;

    beforeAll(async () => {
      const client = newClient();
      fleet = await setUpFleet({ client, log, operatorName: 'Sim Traffic', plan: 'pro', venues: 4, adminSecret: admin });
      start = Date.now();
      backfillFrom = start - 3 * DAY;
      stats = await runSimulation({
        client,
        venues: fleet.venues,
        traffic: new TrafficState({ seed: 11, scale: 0.08, faults: true }),
        log,
        start,
        backfillFrom,
        live: false,
        stopping: () => false,
        onBatch: (b) => batches.push(b),
      });
    }, 240_000);

    const sent = () => batches.flatMap((b) => b.events.map((e) => ({ ...e, venue: b.venue, connector: b.connector })));

    it('sends batches of at most 1,000 events of one venue and connector, and every good event is accepted', async () => {
      expect(batches.length).toBeGreaterThan(14);
      expect(new Set(batches.map((b) => b.connector))).toEqual(new Set(CONNECTOR_TYPES));
      let accepted = 0;
      let malformed = 0;
      for (const b of batches) {
        expect(b.events.length).toBeLessThanOrEqual(1000);
        const bad = b.events.flatMap((e, i) => (e.malformed ? [i] : []));
        malformed += bad.length;
        expect(b.answer.errors.map((e) => e.index)).toEqual(bad);
        for (const e of b.answer.errors)
          expect(e.reason).toMatch(
            /timestamp must be ISO 8601|unknown event type 'visit'|payload.zone 'decommissioned-zone' is not an active zone/,
          );
        expect(b.answer.accepted).toBe(b.events.length - bad.length);
        accepted += b.answer.accepted;
        for (const e of b.events) expect(e.ts).toBeGreaterThanOrEqual(backfillFrom);
        for (const e of b.events) expect(e.ts).toBeLessThan(start);
      }
      expect(malformed).toBeGreaterThan(0);
      expect(stats.unexpected).toEqual([]);
      // Stored once each: the operator's metered ingest equals what the answers accepted.
      const usage = await request(`${api.url}/api/usage`, { key: fleet.state.operator.key });
      expect(usage.body.ingestEvents.used).toBe(accepted);
    });

    it('balances entries and exits per venue and local day', () => {
      let days = 0;
      for (const v of fleet.venues) {
        const perDay = new Map<string, { entries: number; exits: number }>();
        for (const e of sent()) {
          if (e.venue.key !== v.key || e.malformed || (e.event.type !== 'entry' && e.event.type !== 'exit')) continue;
          const n = e.connector === 'verkada' ? (e.event.payload.count as number) : 1;
          const d = perDay.get(localDate(e.ts, v.timezone)) ?? { entries: 0, exits: 0 };
          if (e.event.type === 'entry') d.entries += n;
          else d.exits += n;
          perDay.set(localDate(e.ts, v.timezone), d);
        }
        for (const [date, d] of perDay) {
          // Only local days wholly inside the backfill are complete.
          if (zonedTime(date, 0, v.timezone) < backfillFrom || zonedTime(addDays(date, 1), 0, v.timezone) > start) continue;
          expect(d.entries, `${v.key} ${date}`).toBe(d.exits);
          if (d.entries > 0) days++;
        }
      }
      expect(days).toBeGreaterThanOrEqual(4);
    });

    it('has devices returning on several local days, passers-by seen once or twice, and randomised MACs', () => {
      const mac = (p: Record<string, unknown>) =>
        String(p.clientMac ?? p.sta_eth_mac ?? p.mac)
          .toLowerCase()
          .replace(/-/g, ':');
      let returning = 0;
      let randomized = 0;
      for (const v of fleet.venues) {
        const days = new Map<string, Set<string>>();
        const sightings = new Map<string, number>();
        for (const e of sent()) {
          if (e.venue.key !== v.key || e.malformed || e.event.type !== 'device_seen' || e.connector === 'mywifi') continue;
          const m = mac(e.event.payload);
          if (!days.has(m)) days.set(m, new Set());
          days.get(m)!.add(localDate(e.ts, v.timezone));
          sightings.set(m, (sightings.get(m) ?? 0) + 1);
        }
        returning += [...days.values()].filter((d) => d.size >= 2).length;
        randomized += [...days.keys()].filter((m) => /^.[26ae]/.test(m)).length;
        const counts = [...sightings.values()];
        if (v.connectors.includes('meraki') || v.connectors.includes('aruba'))
          expect(
            counts.some((c) => c <= 2),
            v.key,
          ).toBe(true);
        expect(
          counts.some((c) => c >= 5),
          `${v.key}: long visits seen many times`,
        ).toBe(true);
      }
      expect(returning).toBeGreaterThan(0);
      expect(randomized).toBeGreaterThan(0);
    });

    it('peaks in local daytime hours and is silent at night, in every venue', () => {
      for (const v of fleet.venues) {
        const perHour = new Array<number>(24).fill(0);
        for (const e of sent())
          if (e.venue.key === v.key && !e.malformed && (e.event.type === 'entry' || e.event.type === 'device_seen'))
            perHour[localParts(e.ts, v.timezone).hour]! += 1;
        for (const h of [1, 2, 3, 4, 5]) expect(perHour[h], `${v.key} ${h}:00`).toBe(0);
        // A small sample: the peak hour may be a café's breakfast or a bar's late evening, never the night.
        const peak = perHour.indexOf(Math.max(...perHour));
        expect(peak, `${v.key}: ${perHour.join(',')}`).toBeGreaterThanOrEqual(7);
        expect(peak, `${v.key}: ${perHour.join(',')}`).toBeLessThanOrEqual(22);
        const lunchToEvening = perHour.slice(11, 22).reduce((a, b) => a + b, 0);
        const total = perHour.reduce((a, b) => a + b, 0);
        expect(lunchToEvening / total, `${v.key}: ${perHour.join(',')}`).toBeGreaterThan(0.5);
      }
    });

    it('carries environment readings, heartbeats naming their integration, and Square payments with event ids', () => {
      const events = sent().filter((e) => !e.malformed);
      const env = events.filter((e) => e.event.type === 'environment');
      expect(env.length).toBeGreaterThan(0);
      for (const field of ['temperature', 'co2', 'humidity', 'noise'])
        expect(env.every((e) => typeof e.event.payload[field] === 'number')).toBe(true);
      for (const v of fleet.venues) {
        for (const c of v.connectors) {
          const beats = events.filter((e) => e.venue.key === v.key && e.connector === c && e.event.type === 'heartbeat');
          expect(beats.length, `${v.key}/${c}`).toBeGreaterThan(0);
          expect(beats.every((b) => b.event.payload.integration_id === v.integrations[c])).toBe(true);
        }
      }
      const payments = events.filter((e) => e.event.type === 'transaction');
      expect(payments.length).toBeGreaterThan(0);
      expect(new Set(payments.map((p) => p.event.payload.event_id)).size).toBe(payments.length);
    });

    it('a second run with the same state sends nothing twice', async () => {
      const before = (await request(`${api.url}/api/usage`, { key: fleet.state.operator.key })).body.ingestEvents.used;
      const resumed = await runSimulation({
        client: new ApiClient({ url: api.url, log, key: fleet.state.operator.key }),
        venues: fleet.venues,
        traffic: new TrafficState({ seed: 11, scale: 0.08, faults: true }),
        log,
        start,
        backfillFrom,
        sentUntil: Object.fromEntries(fleet.venues.flatMap((v) => v.connectors.map((c) => [`${v.key}/${c}`, start]))),
        live: false,
        stopping: () => false,
      });
      expect(resumed.batches).toBe(0);
      expect((await request(`${api.url}/api/usage`, { key: fleet.state.operator.key })).body.ingestEvents.used).toBe(before);
    });
  });

  it('live: sends what happens now until the duration ends, then stops cleanly when asked', async () => {
    const client = newClient();
    const fleet = await setUpFleet({ client, log, operatorName: 'Sim Live', plan: 'pro', venues: 4, adminSecret: admin });
    const batches: SentBatch[] = [];
    let progress: Record<string, number> = {};
    const start = Date.now();
    // A twentyfold day, so a few seconds hold events in the venues that are open. Arrivals are
    // random, and at a quiet hour 3 s may hold none: then live again for 3 s, up to five times.
    const options = { seed: 4, scale: 1, faults: false, liveFrom: start, liveRate: 20 };
    const traffic = new TrafficState(options);
    let windowStart = start;
    for (let round = 0; round < 5 && batches.length === 0; round++) {
      windowStart = Date.now();
      const stats = await runSimulation({
        client,
        venues: fleet.venues,
        traffic,
        log,
        start: windowStart,
        live: true,
        liveDurationMs: 3_000,
        tickMs: 500,
        flushMs: 1_000,
        stopping: () => false,
        onBatch: (b) => batches.push(b),
        onProgress: (p) => (progress = p),
      });
      expect(stats.unexpected).toEqual([]);
    }
    const end = Date.now();
    const events = batches.flatMap((b) => b.events);
    expect(events.length).toBeGreaterThan(0);
    for (const e of events) {
      expect(e.ts).toBeGreaterThanOrEqual(start);
      expect(e.ts).toBeLessThan(end);
    }
    for (const b of batches) expect(b.answer).toMatchObject({ accepted: b.events.length, rejected: 0 });
    // Every stream is recorded as sent up to the end of the live part.
    for (const v of fleet.venues)
      for (const c of v.connectors) expect(progress[`${v.key}/${c}`], `${v.key}/${c}`).toBeGreaterThanOrEqual(windowStart + 3_000);

    // Asked to stop: the run ends after at most the batch in flight.
    let stop = false;
    setTimeout(() => (stop = true), 1_500);
    const began = Date.now();
    await runSimulation({
      client,
      venues: fleet.venues,
      traffic: new TrafficState({ ...options, liveFrom: Date.now() }),
      log,
      start: Date.now(),
      live: true,
      tickMs: 500,
      flushMs: 1_000,
      stopping: () => stop,
    });
    // Well below a batch's 60 s request timeout, above one ingest answer on a loaded machine (one
    // full run beside two other e2e files and a starting ClickHouse cluster took 18 s to stop).
    expect(Date.now() - began).toBeLessThan(30_000);
  });

  it('honours 429 Retry-After: waits for the window, resends, and the batch is stored once', async () => {
    const fleet = await setUpFleet({ client: newClient(), log, operatorName: 'Sim Limits', plan: 'pro', venues: 1, adminSecret: admin });
    const key = fleet.state.operator.key;
    // The API's limiter and the client share a clock that moves on only while the client waits:
    // the window ends once the client has waited its Retry-After, and nobody waits in real time.
    const clock = waitlessClock();
    const limiter = limiterFor(api.services.redis, api.services.cfg) as unknown as { now: () => number };
    const realNow = limiter.now;
    // A second into a window of its own, so the burst below never straddles two.
    clock.advance((Math.floor(Date.now() / 60_000) + 1) * 60_000 + 1000 - Date.now());
    limiter.now = clock.now;
    try {
      // Use up the operator's 100 ingest requests of this minute.
      await Promise.all(Array.from({ length: 100 }, () => request(`${api.url}/ingest`, { key, json: { events: [] } })));
      const probe = await request(`${api.url}/ingest`, { key, json: { events: [] } });
      expect(probe.status).toBe(429);
      const retryAfter = Number(probe.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(30);
      const events = Array.from({ length: 5 }, (_, i) => ({
        type: 'heartbeat',
        timestamp: new Date(Date.now() - i * 1000).toISOString(),
        payload: { status: 'ok' },
      }));
      const client = new ApiClient({ url: api.url, log, key, clock });
      const began = clock.now();
      const answer = await client.ingest(fleet.venues[0]!.id, 'meraki', events);
      expect(answer).toMatchObject({ accepted: 5, rejected: 0 });
      expect(client.stats.rateLimited).toBeGreaterThanOrEqual(1);
      expect(clock.now() - began).toBeGreaterThanOrEqual((retryAfter - 1) * 1000);
      const usage = await request(`${api.url}/api/usage`, { key });
      expect(usage.body.ingestEvents.used).toBe(5);
    } finally {
      limiter.now = realNow;
    }
  });
});
