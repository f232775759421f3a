import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { startApi, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { allCommitted, event, openHarness, produce, startSink, type Harness } from '../pipeline/harness.js';
import { DAY, HOUR, MINUTE } from './expected.js';

let api: RunningApi;
let h: Harness;
let op: TestOperator;
let other: TestOperator;
const mine: CanonicalEvent[] = [];
const now = Date.now();

async function integration(key: string, venueId: string): Promise<string> {
  const res = await request(`${api.url}/api/venues/${venueId}/integrations`, {
    key,
    json: { connector_type: 'meraki', config: { api_key: 'secret-key', org_id: 'org-1' } },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id;
}

beforeAll(async () => {
  api = await startApi();
  h = await openHarness();
  op = await newOperator(api, 'pro');
  other = await newOperator(api, 'pro');
  const a = (await newVenue(api, op.key, { timezone: 'UTC' })).id;
  const b = (await newVenue(api, op.key, { timezone: 'Europe/Berlin' })).id;
  const gone = (await newVenue(api, op.key, { timezone: 'UTC' })).id;
  const foreign = (await newVenue(api, other.key, { timezone: 'UTC' })).id;

  // Active integrations of active venues: one of a's three is deleted and one switched off; b's two count; gone's does not.
  const [a1, a2] = [await integration(op.key, a), await integration(op.key, a), await integration(op.key, a)];
  expect((await request(`${api.url}/api/venues/${a}/integrations/${a1}`, { key: op.key, method: 'DELETE' })).status).toBe(200);
  expect(
    (await request(`${api.url}/api/venues/${a}/integrations/${a2}`, { key: op.key, method: 'PUT', json: { is_active: false } })).status,
  ).toBe(200);
  await integration(op.key, b);
  await integration(op.key, b);
  await integration(op.key, gone);
  await integration(other.key, foreign);

  // Every 37 minutes over the last ~21 h, then single events 3, 20, 40 and 100 days ago.
  for (let k = 1; k <= 35; k++) {
    const at = { operatorId: op.id, venueId: k % 2 ? a : b, ts: now - k * 37 * MINUTE };
    mine.push(event({ ...at, type: k % 3 === 0 ? 'entry' : 'exit', metrics: k % 3 === 0 ? { entries: k } : { exits: 1 } }));
    mine.push(event({ ...at, metrics: { temperature: 20 } }));
  }
  for (const days of [3, 20, 40, 100])
    mine.push(event({ operatorId: op.id, venueId: a, ts: now - days * DAY, type: 'entry', metrics: { entries: 2 } }));
  // A venue deleted later still counts with its history.
  mine.push(event({ operatorId: op.id, venueId: gone, ts: now - 2 * HOUR, type: 'exit', metrics: { exits: 4 } }));
  const theirs = Array.from({ length: 10 }, (_, i) =>
    event({ operatorId: other.id, venueId: foreign, ts: now - i * HOUR, type: 'entry', metrics: { entries: 9 } }),
  );

  await produce(h, [...mine, ...theirs]);
  const group = `dashboard-test-${Date.now()}`;
  const sink = await startSink(h, group);
  await allCommitted(h, group);
  await sink.stop();
  expect((await request(`${api.url}/api/venues/${gone}`, { key: op.key, method: 'DELETE' })).status).toBe(200);
});

afterAll(async () => {
  await h.close();
  await api.close();
});

describe('GET /api/dashboard/stats', () => {
  it("summarises the caller's operator", async () => {
    const res = await request(`${api.url}/api/dashboard/stats`, { key: op.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      venueCount: 2,
      events24h: mine.filter((e) => e.ts >= now - DAY).length,
      activeIntegrations: 3,
      avgDwellSeconds: 0,
    });
    const theirs = await request(`${api.url}/api/dashboard/stats`, { key: other.key });
    expect(theirs.body).toEqual({ venueCount: 1, events24h: 10, activeIntegrations: 1, avgDwellSeconds: 0 });
  });

  it('needs a key', async () => {
    expect((await request(`${api.url}/api/dashboard/stats`)).status).toBe(401);
  });
});

describe('GET /api/dashboard/events', () => {
  const ranges = { '24h': [24, HOUR], '7d': [7, DAY], '30d': [30, DAY], '90d': [90, DAY] } as const;

  for (const [range, [buckets, size]] of Object.entries(ranges)) {
    it(`returns ${buckets} ${size === HOUR ? 'hourly' : 'daily'} UTC buckets for ${range}, empty ones as zeros`, async () => {
      const res = await request(`${api.url}/api/dashboard/events?range=${range}`, { key: op.key });
      expect(res.status).toBe(200);
      expect(res.body.range).toBe(range);
      const series = res.body.events as Array<{ ts: number; events: number; entries: number; exits: number }>;
      expect(series).toHaveLength(buckets);
      const from = series[0]!.ts;
      // Ends with the current bucket (read the clock as the server did: it may have ticked over).
      expect(from % size).toBe(0);
      expect(Math.abs(from + buckets * size - (Math.floor(now / size) * size + size))).toBeLessThanOrEqual(size);
      series.forEach((p, i) => expect(p.ts).toBe(from + i * size));
      const want = series.map((p) => {
        const inside = mine.filter((e) => e.ts >= p.ts && e.ts < p.ts + size);
        return {
          ts: p.ts,
          events: inside.length,
          entries: inside.reduce((n, e) => n + (e.metrics.entries ?? 0), 0),
          exits: inside.reduce((n, e) => n + (e.metrics.exits ?? 0), 0),
        };
      });
      expect(series).toEqual(want);
      expect(want.some((p) => p.events === 0)).toBe(true);
      expect(want.reduce((n, p) => n + p.events, 0)).toBeGreaterThan(0);
    });
  }

  it('defaults to 7d and rejects an unknown range', async () => {
    const res = await request(`${api.url}/api/dashboard/events`, { key: op.key });
    expect(res.body.range).toBe('7d');
    expect(res.body.events).toHaveLength(7);
    const bad = await request(`${api.url}/api/dashboard/events?range=1y`, { key: op.key });
    expect(bad.status).toBe(400);
    expect(bad.body.details[0].field).toBe('range');
  });
});
