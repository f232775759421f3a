import { MAX_JSON_DEPTH } from '../../lib/validate.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { billingPeriodStart } from '../../domain/limits/quotas.js';
import { TIMESTAMP_HINT } from '../../domain/ingest/timestamps.js';
import { EventTap, ingest, isoAgo } from './support.js';

let api: RunningApi;
let tap: EventTap;
let pro: TestOperator;
beforeAll(async () => {
  api = await startApi();
  tap = await EventTap.start(api.services.cfg);
  pro = await newOperator(api, 'pro');
});
afterAll(async () => {
  await tap.stop();
  await api.close();
});

const DAY = 86_400_000;
const seen = (payload: Record<string, unknown> = { clientMac: '00:11:22:33:44:55', rssi: 40 }, timestamp: unknown = isoAgo()) => ({
  type: 'device_seen',
  timestamp,
  payload,
});
const fields = (body: { details?: Array<{ field: string }> }) => (body.details ?? []).map((d) => d.field);

async function usage(operatorId: string): Promise<{ ingest_events: number; ingest_dropped: number }> {
  const { rows } = await api.services.db.query(
    `SELECT ingest_events, ingest_dropped FROM usage_counters WHERE operator_id = $1 AND period_start = $2`,
    [operatorId, await periodStart(operatorId)],
  );
  return rows[0] ?? { ingest_events: 0, ingest_dropped: 0 };
}

async function periodStart(operatorId: string): Promise<Date> {
  const { rows } = await api.services.db.query(`SELECT billing_anchor FROM operators WHERE id = $1`, [operatorId]);
  return billingPeriodStart(rows[0].billing_anchor);
}

describe('POST /ingest: the request', () => {
  let venueId: string;
  beforeAll(async () => {
    venueId = (await newVenue(api, pro.key)).id;
  });

  it.each([
    ['no events', { events: [] }, 'events', 'events must hold at least 1 event'],
    ['1,001 events', { events: Array.from({ length: 1001 }, () => seen()) }, 'events', 'events must hold at most 1,000 events per request'],
    ['events not an array', { events: { 0: seen() } }, 'events', undefined],
    ['venue_id missing', { venue_id: undefined }, 'venue_id', undefined],
    ['venue_id not a uuid', { venue_id: 'venue-1' }, 'venue_id', undefined],
    ['connector_type unknown', { connector_type: 'cisco' }, 'connector_type', undefined],
  ])('rejects %s with 400 VALIDATION_ERROR naming the field', async (_case, change, field, message) => {
    const res = await ingest(api, pro.key, { venue_id: venueId, connector_type: 'meraki', events: [seen()], ...change });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.code).toBe('VALIDATION_ERROR');
    expect(fields(res.body)).toEqual([field]);
    if (message) expect(res.body.details[0].message).toBe(message);
  });

  it('refuses an unknown top-level key with 400 VALIDATION_ERROR naming it, and publishes nothing (issue 29)', async () => {
    const venue = await newVenue(api, pro.key);
    for (const extra of [
      { source: 'gateway-1' },
      { connectorType: 'meraki' },
      { venue_id: venue.id, events: [seen()], connector_type: 'meraki', Events: [] },
    ]) {
      const res = await ingest(api, pro.key, { venue_id: venue.id, connector_type: 'meraki', events: [seen()], ...extra });
      const key = Object.keys(extra).find((k) => !['venue_id', 'connector_type', 'events'].includes(k))!;
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body).toEqual({
        error: 'invalid body: check (root)',
        code: 'VALIDATION_ERROR',
        details: [{ field: '(root)', message: `Unrecognized key: "${key}"` }],
      });
    }
    const ok = await ingest(api, pro.key, { venue_id: venue.id, connector_type: 'meraki', events: [seen()] });
    expect(ok.body).toEqual({ accepted: 1, rejected: 0, errors: [] });
    // Only the accepted request's event reached the stream (waitFor checks the exact count).
    await tap.waitFor(venue.id, 1);
  });

  it('takes exactly 1,000 events', async () => {
    const venue = await newVenue(api, pro.key);
    const events = Array.from({ length: 1000 }, (_, i) =>
      seen({ clientMac: `02:00:00:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}` }),
    );
    const res = await ingest(api, pro.key, { venue_id: venue.id, connector_type: 'meraki', events });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ accepted: 1000, rejected: 0, errors: [] });
    const published = await tap.waitFor(venue.id, 1000);
    expect(new Set(published.map((p) => p.partition)).size).toBe(1);
    expect(new Set(published.map((p) => p.event.device)).size).toBe(1000);
    expect(new Set(published.map((p) => p.event.id)).size).toBe(1000);
  });

  it('needs a key (401), refuses another operator’s venue (403) without publishing anything, and a missing or deleted venue (404)', async () => {
    const other = await newOperator(api, 'pro');
    const body = { venue_id: venueId, connector_type: 'meraki', events: [seen()] };
    const anonymous = await request(`${api.url}/ingest`, { json: body });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.code).toBe('UNAUTHORIZED');
    const foreign = await ingest(api, other.key, body);
    expect(foreign.status).toBe(403);
    expect(foreign.body).toEqual({ error: expect.any(String), code: 'FORBIDDEN' });

    const absent = await ingest(api, pro.key, { ...body, venue_id: '0b5e8a3c-1f7e-4c55-9a39-6b0f9e3c1d22' });
    expect(absent.status).toBe(404);
    expect(absent.body.code).toBe('NOT_FOUND');
    const deleted = await newVenue(api, pro.key);
    expect((await request(`${api.url}/api/venues/${deleted.id}`, { key: pro.key, method: 'DELETE' })).status).toBe(200);
    expect((await ingest(api, pro.key, { ...body, venue_id: deleted.id })).status).toBe(404);

    // The owner's marker event is the venue's only message: the refused batch never reached the topic
    // (one venue's events share a partition, so an earlier one would have come first).
    const marker = await ingest(api, pro.key, {
      venue_id: venueId,
      connector_type: 'meraki',
      events: [{ type: 'heartbeat', timestamp: isoAgo(), payload: {} }],
    });
    expect(marker.body.accepted).toBe(1);
    const [only] = await tap.waitFor(venueId, 1);
    expect(only!.event.type).toBe('heartbeat');
  });
});

describe('POST /ingest: each event on its own', () => {
  it('accepts the valid events and names each rejected one by index with a human reason', async () => {
    const free = await newOperator(api, 'free');
    const venue = await newVenue(api, free.key);
    const iso = `timestamp must be ISO 8601 with a date, a time and a time zone (${TIMESTAMP_HINT})`;
    const ms = Math.floor((Date.now() - 3_600_000) / 1000) * 1000;
    const events = [
      /* 0 */ seen(),
      /* 1 */ { type: 'foo', timestamp: isoAgo(), payload: {} },
      /* 2 */ seen(undefined, 'yesterday'),
      /* 3 */ seen(undefined, 1_700_000_000_000),
      /* 4 */ seen(undefined, '2025-06-01'),
      /* 5 */ seen(undefined, '2025-06-01T12:00:00'),
      /* 6 */ seen({ clientMac: '00:11:22:33:44:55', rssi: 'strong' }),
      /* 7 */ seen({ rssi: 40 }),
      /* 8 */ seen(undefined, new Date(Date.now() + 10 * 60_000).toISOString()),
      /* 9 */ seen(undefined, new Date(Date.now() - 8 * DAY).toISOString()),
      /* 10 */ 'device_seen',
      /* 11 */ { type: 'environment', timestamp: isoAgo(), payload: { serial: 'Q3CA' } },
      /* 12 */ { type: 'heartbeat', timestamp: isoAgo() },
      /* 13 */ { type: 'foo', timestamp: 'yesterday', payload: {} },
      /* 14 */ { type: 'heartbeat', timestamp: isoAgo(), payload: [] },
      /* 15 */ seen(undefined, '2025-02-30T10:00:00Z'),
      /* 16 */ seen(undefined, new Date(ms + 5.5 * 3_600_000).toISOString().replace('.000Z', '+05:30')),
      /* 17 */ { timestamp: isoAgo(), payload: {} },
      /* 18 */ { type: 'environment', timestamp: isoAgo(), payload: { temperature: 400, humidity: 50 } },
      /* 19 */ seen(undefined, new Date(Date.now() + 2 * 60_000).toISOString()),
    ];
    const res = await ingest(api, free.key, { venue_id: venue.id, connector_type: 'meraki', events });
    expect(res.status).toBe(202);
    const accepted = 'device_seen, environment, heartbeat';
    expect(res.body).toEqual({
      accepted: 4,
      rejected: 16,
      errors: [
        { index: 1, reason: `unknown event type 'foo' for connector meraki (accepted: ${accepted})` },
        { index: 2, reason: iso },
        { index: 3, reason: `timestamp must be ISO 8601 (${TIMESTAMP_HINT}), not an epoch number` },
        { index: 4, reason: iso },
        { index: 5, reason: iso },
        { index: 6, reason: 'payload.rssi: expected number, received string' },
        { index: 7, reason: 'payload.clientMac: required' },
        { index: 8, reason: 'timestamp is more than 5 minutes in the future' },
        { index: 9, reason: 'timestamp is older than the 7-day retention of the Free plan' },
        { index: 10, reason: 'event must be an object with type, timestamp and payload' },
        { index: 11, reason: 'payload: give at least one reading: temperature, co2, humidity, noise' },
        { index: 13, reason: `unknown event type 'foo' for connector meraki (accepted: ${accepted}); ${iso}` },
        { index: 14, reason: 'payload must be an object' },
        { index: 15, reason: iso },
        { index: 17, reason: `type is required: one of ${accepted}` },
        { index: 18, reason: 'payload.temperature: too big: expected number to be <=150' },
      ],
    });
    const published = await tap.waitFor(venue.id, 4);
    expect(published.map((p) => p.event.type)).toEqual(['device_seen', 'heartbeat', 'device_seen', 'device_seen']);
    expect(published[1]!.event.payload).toEqual({ status: 'ok' });
    expect(published[2]!.event.ts).toBe(ms);
  });

  it('rejects an event with an unknown envelope field, naming it, and still drops unknown payload fields (issue 29)', async () => {
    const venue = await newVenue(api, pro.key);
    const mac = '00:11:22:33:44:66';
    const events = [
      /* 0 */ seen(),
      /* 1 */ { ...seen(), timestmap: isoAgo() },
      /* 2 */ { ...seen(), rssi: 40, clientMac: mac },
      /* 3 */ { ...seen({ clientMac: mac, rssi: 41, ipv4: '10.0.0.7', observations: [{ clientMac: mac }] }), event_id: 'evt-3' },
      /* 4 */ { type: 'foo', timestamp: isoAgo(), payload: {}, "it's\u202e": 1 },
      /* 5 */ { ...seen(), a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7 },
    ];
    const res = await ingest(api, pro.key, { venue_id: venue.id, connector_type: 'meraki', events });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const only = 'an event holds only type, timestamp, payload and event_id (connector fields go in payload)';
    expect(res.body).toEqual({
      accepted: 2,
      rejected: 4,
      errors: [
        { index: 1, reason: `unknown field 'timestmap': ${only}` },
        { index: 2, reason: `unknown fields 'rssi', 'clientMac': ${only}` },
        {
          index: 4,
          reason: `unknown field 'it\\u0027s\\u202e': ${only}; unknown event type 'foo' for connector meraki (accepted: device_seen, environment, heartbeat)`,
        },
        { index: 5, reason: `unknown fields 'a', 'b', 'c', 'd', 'e' and 2 more: ${only}` },
      ],
    });
    const published = await tap.waitFor(venue.id, 2);
    // The accepted event's unknown payload fields are dropped, not stored and not a rejection.
    expect(Object.keys(published[1]!.event.payload).sort()).toEqual(['clientMac', 'rssi']);
    expect(JSON.stringify(published[1]!.event)).not.toContain('10.0.0.7');
  });

  it('takes any text in payload strings and drops unknown fields nested up to the body depth limit', async () => {
    const venue = await newVenue(api, pro.key);
    const message = 'nul\u0000 lone \ud800 emoji 😀 ünïcödé';
    // As deep as a body may nest (MAX_JSON_DEPTH counts the body, events and the event's payload too).
    const deep = `${'{"a":'.repeat(MAX_JSON_DEPTH - 4)}1${'}'.repeat(MAX_JSON_DEPTH - 4)}`;
    const event = JSON.stringify({
      type: 'heartbeat',
      timestamp: isoAgo(),
      payload: { message, version: 'x'.repeat(64), junk: 0 },
    }).replace('"junk":0', `"junk":${deep}`);
    const res = await request(`${api.url}/ingest`, {
      key: pro.key,
      rawBody: `{"venue_id":"${venue.id}","connector_type":"meraki","events":[${event}]}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toEqual({ accepted: 1, rejected: 0, errors: [] });
    const [published] = await tap.waitFor(venue.id, 1);
    expect(published!.event.payload).toEqual({ status: 'ok', message, version: 'x'.repeat(64) });
  });

  it('keeps a plan’s longer retention (Business: 365 days)', async () => {
    const venue = await newVenue(api, pro.key);
    const res = await ingest(api, pro.key, {
      venue_id: venue.id,
      connector_type: 'unifi',
      events: [seen({ mac: '00:11:22:33:44:55' }, isoAgo(300 * DAY)), seen({ mac: '00:11:22:33:44:55' }, isoAgo(366 * DAY))],
    });
    expect(res.body).toEqual({
      accepted: 1,
      rejected: 1,
      errors: [{ index: 1, reason: 'timestamp is older than the 365-day retention of the Business plan' }],
    });
  });

  it('counts accepted events in the throughput figure', async () => {
    const venue = await newVenue(api, pro.key);
    // The per-minute counters are shared by every API instance (and test run), so read this
    // minute's and the next one's directly: together they grow by at least what was accepted.
    const minute = Math.floor(Date.now() / 60_000);
    const counted = async () =>
      (await api.services.redis.mget(`stats:accepted:${minute}`, `stats:accepted:${minute + 1}`)).reduce((n, v) => n + Number(v ?? 0), 0);
    const before = await counted();
    const res = await ingest(api, pro.key, { venue_id: venue.id, connector_type: 'meraki', events: [seen(), seen(), seen({})] });
    expect(res.body.accepted).toBe(2);
    expect(await counted()).toBeGreaterThanOrEqual(before + 2);
  });
});

describe('POST /ingest: the monthly ingest quota', () => {
  it('on Free, rejects the batch’s last valid events past 10,000 and the counter stops at 10,000', async () => {
    const free = await newOperator(api, 'free');
    const venue = await newVenue(api, free.key);
    await api.services.db.query(
      `INSERT INTO usage_counters (operator_id, period_start, ingest_events) VALUES ($1, $2, 9997)
       ON CONFLICT (operator_id, period_start) DO UPDATE SET ingest_events = 9997`,
      [free.id, await periodStart(free.id)],
    );
    const quota = 'monthly ingest quota of 10,000 events exceeded (Free plan)';
    const res = await ingest(api, free.key, {
      venue_id: venue.id,
      connector_type: 'meraki',
      events: [seen(), seen(undefined, 'yesterday'), seen(), seen(), seen(), seen()],
    });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      accepted: 3,
      rejected: 3,
      errors: [
        { index: 1, reason: expect.stringMatching(/^timestamp must be ISO 8601/) },
        { index: 4, reason: quota },
        { index: 5, reason: quota },
      ],
    });
    expect(await usage(free.id)).toEqual({ ingest_events: 10_000, ingest_dropped: 2 });

    const more = await ingest(api, free.key, { venue_id: venue.id, connector_type: 'meraki', events: [seen()] });
    expect(more.body).toEqual({ accepted: 0, rejected: 1, errors: [{ index: 0, reason: quota }] });
    expect(await usage(free.id)).toEqual({ ingest_events: 10_000, ingest_dropped: 3 });
    await tap.waitFor(venue.id, 3);
  });

  it('on paid plans, counts past the quota instead of dropping (overage is billed)', async () => {
    const starter = await newOperator(api, 'starter');
    const venue = await newVenue(api, starter.key);
    await api.services.db.query(
      `INSERT INTO usage_counters (operator_id, period_start, ingest_events) VALUES ($1, $2, 99999)
       ON CONFLICT (operator_id, period_start) DO UPDATE SET ingest_events = 99999`,
      [starter.id, await periodStart(starter.id)],
    );
    const res = await ingest(api, starter.key, { venue_id: venue.id, connector_type: 'meraki', events: [seen(), seen(), seen()] });
    expect(res.body).toEqual({ accepted: 3, rejected: 0, errors: [] });
    expect(await usage(starter.id)).toEqual({ ingest_events: 100_002, ingest_dropped: 0 });
  });
});
