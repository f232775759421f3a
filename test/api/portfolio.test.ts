import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertDerivedVisits } from '../../clickhouse/queries/derive-visits.js';
import { venueCapacity } from '../../domain/dashboard/portfolio.js';
import { request } from '../support/http.js';
import { startServiceStack, type ServiceStack } from '../support/service-stack.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

let stack: ServiceStack;
let op: TestOperator;
let other: TestOperator;
let berlin: { id: string };
let tokyo: { id: string };

/**
 * "Today" is the venue's local day: a run within minutes of a venue's local midnight would see its
 * events fall on yesterday. Each venue takes the first of its zones whose local time is at least
 * half an hour from midnight (two zones at least an hour apart always leave one).
 */
function awayFromMidnight(...zones: string[]): string {
  const minutes = (zone: string) => {
    const [h, m] = new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
      .format(Date.now())
      .split(':')
      .map(Number);
    return h! * 60 + m!;
  };
  return zones.find((z) => minutes(z) >= 30 && minutes(z) <= 23 * 60 + 30) ?? zones[zones.length - 1]!;
}
const berlinZone = awayFromMidnight('Europe/Berlin', 'Asia/Kolkata');
const tokyoZone = awayFromMidnight('Asia/Tokyo', 'America/New_York');

const post = (path: string, key: string, json: unknown) => request(`${stack.api.url}${path}`, { key, json });
const ingest = async (key: string, venueId: string, connector: string, events: unknown[]) => {
  const res = await post('/ingest', key, { venue_id: venueId, connector_type: connector, events });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(res.body.rejected, JSON.stringify(res.body)).toBe(0);
};
const portfolioOf = async (key: string) => {
  const res = await request(`${stack.api.url}/api/dashboard/portfolio`, { key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
};
async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

beforeAll(async () => {
  stack = await startServiceStack('portfolio');
  op = await newOperator(stack.api, 'pro');
  other = await newOperator(stack.api, 'pro');
  berlin = await newVenue(stack.api, op.key, { name: 'Berlin Store', timezone: berlinZone });
  tokyo = await newVenue(stack.api, op.key, { name: 'Tokyo Cafe', timezone: tokyoZone });
  await newVenue(stack.api, other.key, { name: 'Not yours', timezone: 'Europe/Berlin' });
  for (const zone of [
    { slug: 'door', name: 'Door', type: 'entrance', capacity: 100 },
    { slug: 'hall', name: 'Hall', type: 'area', capacity: 10 },
  ]) {
    expect((await post(`/api/venues/${berlin.id}/zones`, op.key, zone)).status).toBe(201);
  }
  expect(
    (await post(`/api/venues/${berlin.id}/integrations`, op.key, { connector_type: 'density', config: { api_token: 'tok' } })).status,
  ).toBe(201);
  expect(
    (await post(`/api/venues/${berlin.id}/integrations`, op.key, { connector_type: 'verkada', config: { org_id: 'o', api_key: 'k' } }))
      .status,
  ).toBe(201);
  expect(
    (await post(`/api/venues/${tokyo.id}/integrations`, op.key, { connector_type: 'meraki', config: { api_key: 'k', org_id: '1' } }))
      .status,
  ).toBe(201);
});

afterAll(async () => {
  await stack?.close();
});

describe('GET /api/dashboard/portfolio', () => {
  it("gives every venue's live occupancy against capacity, alarms, connectors, today's events and dwell, the one needing attention first", async () => {
    const now = Date.now();
    const at = (ms: number) => new Date(ms).toISOString();
    // Berlin: 5 people in through the door, the hall full (CRITICAL), one finished 5-minute visit today.
    await ingest(op.key, berlin.id, 'density', [
      ...Array.from({ length: 5 }, (_, i) => ({
        type: 'entry',
        timestamp: at(now - 60_000 + i * 1000),
        payload: { space_id: 'spc_1', doorway_id: 'drw_1', direction: 1, zone: 'door' },
      })),
      { type: 'occupancy', timestamp: at(now - 30_000), payload: { space_id: 'spc_2', update_type: 'live', occupancy: 10, zone: 'hall' } },
    ]);
    // Tokyo: three sightings today, one two days ago (not today in any time zone).
    await ingest(op.key, tokyo.id, 'meraki', [
      ...Array.from({ length: 3 }, (_, i) => ({
        type: 'device_seen',
        timestamp: at(now - 10_000),
        payload: { clientMac: `3C:22:FB:1A:2B:0${i}`, rssi: 40 },
      })),
      { type: 'device_seen', timestamp: at(now - 2 * 86_400_000), payload: { clientMac: '3C:22:FB:1A:2B:09', rssi: 40 } },
    ]);
    const started = Math.max(now - 10 * 60_000, now - (now % 60_000) - 60_000);
    await insertDerivedVisits(stack.api.services.ch, [
      {
        operator_id: op.id,
        venue_id: berlin.id,
        day: at(now).slice(0, 10),
        retention_days: 365,
        live: 1,
        version: 1,
        zone_id: '',
        device: 'd1',
        start_ms: started - 300_000,
        end_ms: started,
        closes_ms: started + 1000,
        sightings: 3,
        randomized_mac: 0,
      },
    ]);

    const body = await waitFor('both venues graded', async () => {
      const b = await portfolioOf(op.key);
      const [first, second] = b.venues;
      return first?.alarms.CRITICAL === 1 &&
        first.occupancy.value === 5 &&
        first.connectors.healthy === 1 &&
        second?.events_today === 3 &&
        second.connectors.healthy === 1
        ? b
        : undefined;
    });
    expect(body.venues.map((v: { name: string }) => v.name)).toEqual(['Berlin Store', 'Tokyo Cafe']);
    const [b, t] = body.venues;
    expect(b).toMatchObject({
      id: berlin.id,
      timezone: berlinZone,
      occupancy: { value: 5, capacity: 100, percent: 5 },
      alarms: { CRITICAL: 1, MAJOR: 0, MINOR: 0, WARNING: 0 },
      // Density sends; Verkada, created a moment ago and silent, is within its grace.
      connectors: { healthy: 1, degraded: 0, offline: 0, waiting: 1 },
      events_today: 6,
      avg_dwell_seconds_today: 300,
    });
    expect(Date.now() - Date.parse(b.occupancy.updated_at)).toBeLessThan(120_000);
    expect(b.local_day).toBe(new Intl.DateTimeFormat('en-CA', { timeZone: berlinZone }).format(now));
    expect(t).toMatchObject({
      occupancy: { value: 0, capacity: null, percent: null, updated_at: null },
      alarms: { CRITICAL: 0, MAJOR: 0, MINOR: 0, WARNING: 0 },
      connectors: { healthy: 1, degraded: 0, offline: 0, waiting: 0 },
      events_today: 3,
      avg_dwell_seconds_today: null,
    });
    expect(t.local_day).toBe(new Intl.DateTimeFormat('en-CA', { timeZone: tokyoZone }).format(now));
  });

  it('shows each operator only its own venues, and is refused without a key', async () => {
    const theirs = await portfolioOf(other.key);
    expect(theirs.venues.map((v: { name: string }) => v.name)).toEqual(['Not yours']);
    expect(theirs.venues[0]).toMatchObject({ events_today: 0, occupancy: { value: 0 }, alarms: { CRITICAL: 0 } });
    expect((await request(`${stack.api.url}/api/dashboard/portfolio`)).status).toBe(401);
  });

  it('reads a venue capacity from its largest door zone, else its area zones, else none', () => {
    expect(
      venueCapacity([
        { type: 'entrance', capacity: 350 },
        { type: 'exit', capacity: 400 },
        { type: 'area', capacity: 250 },
      ]),
    ).toBe(400);
    expect(
      venueCapacity([
        { type: 'area', capacity: 250 },
        { type: 'area', capacity: 24 },
        { type: 'counter', capacity: 30 },
      ]),
    ).toBe(274);
    expect(
      venueCapacity([
        { type: 'entrance', capacity: null },
        { type: 'counter', capacity: 30 },
      ]),
    ).toBeNull();
  });
});
