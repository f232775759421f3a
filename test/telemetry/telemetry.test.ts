import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { startApi, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { allCommitted, deviceId, event, openHarness, produce, startSink, type Harness } from '../pipeline/harness.js';
import {
  AGGS,
  BERLIN,
  DAY,
  dayBucketer,
  epochBucketer,
  expectedSeries,
  expectSeries,
  HOUR,
  KOLKATA,
  lastSunday,
  MINUTE,
  UTC,
  type Bucketer,
} from './expected.js';

let api: RunningApi;
let h: Harness;
let op: TestOperator;
let other: TestOperator;
const venue: Record<'utc' | 'berlin' | 'kolkata' | 'foreign', string> = { utc: '', berlin: '', kolkata: '', foreign: '' };
const events: CanonicalEvent[] = [];

const today = Math.floor(Date.now() / DAY) * DAY;
/** Three busy hours on a recent UTC day. */
const base = today - 3 * DAY + 9 * HOUR;
/** The most recent end-of-DST (25-hour day) and start-of-DST (23-hour day) in Berlin, at least two days ago. */
const year = new Date(today).getUTCFullYear();
const fallBack = [lastSunday(year, 9), lastSunday(year - 1, 9)].find((d) => d <= today - 4 * DAY)!;
const springForward = [lastSunday(year, 2), lastSunday(year - 1, 2)].find((d) => d <= today - 4 * DAY)!;

function busyHours(operatorId: string, venueId: string): CanonicalEvent[] {
  const out: CanonicalEvent[] = [];
  for (let i = 0, ts = base; ts < base + 3 * HOUR; i++, ts += 23_000) {
    const at = { operatorId, venueId, ts };
    if (i % 5 === 0)
      out.push(event({ ...at, type: 'environment', metrics: { temperature: 15 + ((i * 7) % 100) / 10, humidity: 30 + (i % 40) } }));
    else if (i % 5 === 1) out.push(event({ ...at, type: 'entry', metrics: { entries: 1 + (i % 4) } }));
    else if (i % 5 === 2) out.push(event({ ...at, type: 'exit', metrics: { exits: 1 + (i % 3) } }));
    else if (i % 5 === 3) out.push(event({ ...at, type: 'device_seen', device: deviceId(`d-${i % 29}`) }));
    else out.push(event({ ...at, type: 'occupancy', metrics: { occupancy: (i * 13) % 200 } }));
  }
  // Noise only in the first and third hour: gaps for the fill modes.
  out.push(event({ operatorId, venueId, ts: base + 5 * MINUTE, metrics: { noise: 40 } }));
  out.push(event({ operatorId, venueId, ts: base + 2 * HOUR + 5 * MINUTE, metrics: { noise: 60 } }));
  return out;
}

/** An event every `stepMin` minutes over [from, to), cycling readings, entries and devices. */
function spread(operatorId: string, venueId: string, from: number, to: number, stepMin: number): CanonicalEvent[] {
  const out: CanonicalEvent[] = [];
  for (let i = 0, ts = from; ts < to; i++, ts += stepMin * MINUTE) {
    const at = { operatorId, venueId, ts };
    if (i % 3 === 0) out.push(event({ ...at, metrics: { temperature: 10 + (i % 17) } }));
    else if (i % 3 === 1) out.push(event({ ...at, type: 'entry', metrics: { entries: 1 + (i % 5) } }));
    else out.push(event({ ...at, type: 'device_seen', device: deviceId(`m-${i % 11}`) }));
  }
  return out;
}

beforeAll(async () => {
  api = await startApi();
  h = await openHarness();
  op = await newOperator(api, 'pro');
  other = await newOperator(api, 'pro');
  venue.utc = (await newVenue(api, op.key, { timezone: 'UTC' })).id;
  venue.berlin = (await newVenue(api, op.key, { timezone: 'Europe/Berlin' })).id;
  venue.kolkata = (await newVenue(api, op.key, { timezone: 'Asia/Kolkata' })).id;
  venue.foreign = (await newVenue(api, other.key, { timezone: 'UTC' })).id;
  events.push(
    ...busyHours(op.id, venue.utc),
    ...spread(op.id, venue.berlin, fallBack - 3 * DAY, fallBack + 4 * DAY, 53),
    ...spread(op.id, venue.berlin, springForward - 2 * DAY, springForward + 3 * DAY, 47),
    ...spread(op.id, venue.kolkata, today - 6 * DAY, today - DAY, 71),
    ...busyHours(other.id, venue.foreign),
  );
  await produce(h, events);
  const group = `telemetry-test-${Date.now()}`;
  const sink = await startSink(h, group, { batchRows: 5000 });
  await allCommitted(h, group, 60_000);
  await sink.stop();
});

afterAll(async () => {
  await h.close();
  await api.close();
});

// `occupancy` is the occupancy processor's derived count (no processor runs here): its series are
// checked at every resolution in test/processors/occupancy.test.ts.
const ALL_KEYS = ['temperature', 'co2', 'humidity', 'noise', 'entries', 'exits', 'devices'];

function telemetry(venueId: string, query: Record<string, string | number>, key = op.key) {
  const qs = new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)]));
  return request(`${api.url}/api/venues/${venueId}/telemetry?${qs}`, { key });
}

async function check(venueId: string, start: number, end: number, interval: number, bucketOf: Bucketer, keys = ALL_KEYS) {
  const mine = events.filter((e) => e.venueId === venueId);
  for (const agg of AGGS) {
    const res = await telemetry(venueId, { keys: keys.join(','), startTs: start, endTs: end, interval, agg });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual([...keys].sort());
    let points = 0;
    for (const key of keys) {
      const want = expectedSeries(mine, key, agg, bucketOf);
      points += want.length;
      expectSeries(res.body[key], want, `${key} ${agg} every ${interval} ms`);
    }
    expect(points, 'the range holds data').toBeGreaterThan(0);
  }
}

describe('GET /api/venues/:id/telemetry', () => {
  // Mid-minute bounds: rollup rows are selected by their start, [start, end).
  const start = base + 7 * MINUTE + 13_000;
  const end = base + 2 * HOUR + 41 * MINUTE + 7_000;

  it('aggregates 1-minute buckets from the minute rollup, every aggregation, every key', async () => {
    await check(venue.utc, start, end, MINUTE, epochBucketer(start, end, MINUTE));
  });

  it('aggregates 5-minute buckets (epoch-aligned) from the minute rollup', async () => {
    await check(venue.utc, start, end, 5 * MINUTE, epochBucketer(start, end, 5 * MINUTE));
  });

  it('aggregates hourly and 2-hour buckets from the hourly rollup', async () => {
    await check(venue.utc, base - HOUR, base + 4 * HOUR, HOUR, epochBucketer(base - HOUR, base + 4 * HOUR, HOUR));
    await check(venue.utc, start, end, HOUR, epochBucketer(start, end, HOUR));
    await check(venue.utc, base - 5 * HOUR, base + 5 * HOUR, 2 * HOUR, epochBucketer(base - 5 * HOUR, base + 5 * HOUR, 2 * HOUR));
  });

  it('aggregates daily buckets from the daily rollup (UTC venue)', async () => {
    await check(venue.utc, today - 10 * DAY, today, DAY, dayBucketer(today - 10 * DAY, today, 1, UTC));
  });

  it('aligns day buckets to local midnight across the end of DST (a 25-hour day) in Berlin', async () => {
    const from = fallBack - 3 * DAY - 5 * HOUR;
    const to = fallBack + 5 * DAY;
    await check(venue.berlin, from, to, DAY, dayBucketer(from, to, 1, BERLIN), ['temperature', 'entries', 'devices']);
    await check(venue.berlin, from, to, 2 * DAY, dayBucketer(from, to, 2, BERLIN), ['temperature', 'entries', 'devices']);
    const res = await telemetry(venue.berlin, {
      keys: 'entries',
      startTs: fallBack - DAY,
      endTs: fallBack + 47 * HOUR,
      interval: DAY,
      agg: 'COUNT',
    });
    const starts = res.body.entries.map((p: { ts: number }) => p.ts);
    // Local midnights: CEST (UTC+2) before the switch, CET (UTC+1) after; the switch day lasts 25 h.
    expect(starts).toEqual([fallBack - 2 * HOUR, fallBack + DAY - HOUR]);
    expect(starts[1] - starts[0]).toBe(25 * HOUR);
  });

  it('aligns day buckets to local midnight across the start of DST (a 23-hour day) in Berlin', async () => {
    const from = springForward - 2 * DAY;
    const to = springForward + 3 * DAY;
    await check(venue.berlin, from, to, DAY, dayBucketer(from, to, 1, BERLIN), ['temperature', 'entries', 'devices']);
    const res = await telemetry(venue.berlin, {
      keys: 'entries',
      startTs: springForward - HOUR,
      endTs: springForward + 2 * DAY,
      interval: DAY,
      agg: 'SUM',
    });
    const starts = res.body.entries.map((p: { ts: number }) => p.ts);
    expect(starts[1] - starts[0]).toBe(23 * HOUR);
  });

  it('aligns day buckets to local midnight in a half-hour zone (Asia/Kolkata)', async () => {
    const from = today - 7 * DAY;
    await check(venue.kolkata, from, today, DAY, dayBucketer(from, today, 1, KOLKATA), ['temperature', 'entries', 'devices']);
  });

  it('counts distinct devices per requested bucket, not the sum of smaller buckets', async () => {
    const q = { keys: 'devices', startTs: base, endTs: base + HOUR };
    const perMinute = (await telemetry(venue.utc, { ...q, interval: MINUTE })).body.devices as Array<{ value: number }>;
    const hourly = (await telemetry(venue.utc, { ...q, interval: HOUR, agg: 'SUM' })).body.devices as Array<{ value: number }>;
    const distinct = new Set(events.filter((e) => e.venueId === venue.utc && e.device && e.ts < base + HOUR).map((e) => e.device)).size;
    expect(hourly).toEqual([{ ts: base, value: distinct }]);
    expect(perMinute.reduce((n, p) => n + p.value, 0)).toBeGreaterThan(distinct);
  });

  it('omits empty buckets by default and fills them with null, zero or the previous value on request', async () => {
    const q = { keys: 'noise', startTs: base - HOUR, endTs: base + 3 * HOUR, interval: HOUR, agg: 'MAX' };
    const series = async (fill?: string) => (await telemetry(venue.utc, fill ? { ...q, fill } : q)).body.noise;
    expect(await series()).toEqual([
      { ts: base, value: 40 },
      { ts: base + 2 * HOUR, value: 60 },
    ]);
    expect(await series('null')).toEqual([
      { ts: base - HOUR, value: null },
      { ts: base, value: 40 },
      { ts: base + HOUR, value: null },
      { ts: base + 2 * HOUR, value: 60 },
    ]);
    expect((await series('zero')).map((p: { value: number }) => p.value)).toEqual([0, 40, 0, 60]);
    // Nothing before the first value to repeat: that bucket stays omitted.
    expect(await series('previous')).toEqual([
      { ts: base, value: 40 },
      { ts: base + HOUR, value: 40 },
      { ts: base + 2 * HOUR, value: 60 },
    ]);
  });

  it('excludes the end bound and returns empty series for keys without data', async () => {
    const res = await telemetry(venue.utc, { keys: 'noise,co2', startTs: base, endTs: base + 5 * MINUTE, interval: MINUTE, agg: 'COUNT' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ noise: [], co2: [] });
    const incl = await telemetry(venue.utc, { keys: 'noise', startTs: base, endTs: base + 5 * MINUTE + 1, interval: MINUTE, agg: 'COUNT' });
    expect(incl.body.noise).toEqual([{ ts: base + 5 * MINUTE, value: 1 }]);
  });

  it('defaults to hourly AVG', async () => {
    const res = await telemetry(venue.utc, { keys: 'temperature', startTs: base, endTs: base + 3 * HOUR });
    const want = expectedSeries(
      events.filter((e) => e.venueId === venue.utc),
      'temperature',
      'AVG',
      epochBucketer(base, base + 3 * HOUR, HOUR),
    );
    expectSeries(res.body.temperature, want, 'default');
  });

  it('answers 400 naming the cap when a key would get more than 20160 points', async () => {
    const res = await telemetry(venue.utc, { keys: 'temperature', startTs: base, endTs: base + 15 * DAY, interval: MINUTE });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_ERROR');
    expect(res.body.error).toContain('20160');
    const atCap = await telemetry(venue.utc, { keys: 'temperature', startTs: base, endTs: base + 14 * DAY, interval: MINUTE });
    expect(atCap.status).toBe(200);
  });

  it('validates the query', async () => {
    const ok = { keys: 'temperature', startTs: base, endTs: base + HOUR };
    const bad = async (query: Record<string, string | number>, field: string, text?: string) => {
      const res = await telemetry(venue.utc, query);
      expect(res.status, JSON.stringify(query)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_ERROR');
      const problem = res.body.details.find((d: { field: string }) => d.field === field);
      expect(problem, JSON.stringify(res.body)).toBeDefined();
      if (text) expect(problem.message).toContain(text);
    };
    await bad({ startTs: base, endTs: base + HOUR }, 'keys');
    await bad({ ...ok, keys: 'temperature,foo' }, 'keys', "unknown telemetry key 'foo'");
    await bad({ ...ok, keys: ',' }, 'keys');
    await bad({ keys: 'co2', endTs: base }, 'startTs');
    await bad({ ...ok, startTs: 'yesterday' }, 'startTs');
    await bad({ ...ok, startTs: '1.5e12' }, 'startTs');
    await bad({ ...ok, endTs: base }, 'endTs', 'greater than startTs');
    await bad({ ...ok, interval: 30_000 }, 'interval', 'multiple of 60000');
    await bad({ ...ok, interval: 90_000 }, 'interval', 'multiple of 60000');
    await bad({ ...ok, interval: 0 }, 'interval');
    await bad({ ...ok, agg: 'MEDIAN' }, 'agg');
    await bad({ ...ok, fill: 'linear' }, 'fill');
    await bad({ ...ok, zoneId: 'hall' }, 'zoneId');
  });

  it("takes a zone's occupancy history only for an active area or counter zone of the venue, and only with the occupancy key", async () => {
    const zone = async (venueId: string, key: string, body: Record<string, unknown>) => {
      const res = await request(`${api.url}/api/venues/${venueId}/zones`, { key, json: { name: body.slug, ...body } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.id as string;
    };
    const area = await zone(venue.utc, op.key, { slug: `hall-${Date.now()}`, type: 'area', capacity: 10 });
    const door = await zone(venue.utc, op.key, { slug: `door-${Date.now()}`, type: 'entrance' });
    const foreign = await zone(venue.foreign, other.key, { slug: `theirs-${Date.now()}`, type: 'area' });
    const q = { keys: 'occupancy', startTs: base, endTs: base + HOUR };
    const ok = await telemetry(venue.utc, { ...q, zoneId: area });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body).toEqual({ occupancy: [] });
    const refused = async (query: Record<string, string | number>, field: string, text: string) => {
      const res = await telemetry(venue.utc, query);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.details, JSON.stringify(res.body)).toContainEqual({ field, message: expect.stringContaining(text) });
    };
    await refused({ ...q, keys: 'occupancy,entries', zoneId: area }, 'keys', 'only occupancy has a per-zone history');
    await refused({ ...q, zoneId: door }, 'zoneId', 'a entrance zone has no occupancy of its own');
    // Another venue's zone (even another operator's) is no zone of this venue.
    await refused({ ...q, zoneId: foreign }, 'zoneId', 'not an active zone of this venue');
    await refused({ ...q, zoneId: '00000000-0000-4000-8000-000000000000' }, 'zoneId', 'not an active zone of this venue');
  });

  it("is tenant scoped: another operator's venue is 403, an unknown one 404, no key 401", async () => {
    const q = { keys: 'temperature', startTs: base, endTs: base + HOUR };
    expect((await telemetry(venue.foreign, q)).status).toBe(403);
    expect((await telemetry(venue.utc, q, other.key)).status).toBe(403);
    expect((await telemetry('00000000-0000-4000-8000-000000000000', q)).status).toBe(404);
    expect((await telemetry('not-a-uuid', q)).status).toBe(400);
    const anonymous = await request(`${api.url}/api/venues/${venue.utc}/telemetry?keys=co2&startTs=0&endTs=1`);
    expect(anonymous.status).toBe(401);
    // The other operator's own data is there, and only theirs.
    const theirs = await telemetry(venue.foreign, { ...q, agg: 'COUNT', keys: 'temperature' }, other.key);
    const want = expectedSeries(
      events.filter((e) => e.venueId === venue.foreign),
      'temperature',
      'COUNT',
      epochBucketer(base, base + HOUR, HOUR),
    );
    expectSeries(theirs.body.temperature, want, 'foreign');
  });
});

describe('telemetry across a plan change', () => {
  it('answers with the rows of every retention class the operator has had, whichever table fed them', async () => {
    const admin = { 'x-admin-key': api.services.cfg.ADMIN_SECRET };
    const changer = await newOperator(api, 'starter');
    const venueId = (await newVenue(api, changer.key, { timezone: 'UTC' })).id;
    const hour = today - 2 * DAY + 14 * HOUR;
    const before = spread(changer.id, venueId, hour, hour + 30 * MINUTE, 3);
    const after = spread(changer.id, venueId, hour + 30 * MINUTE, hour + HOUR, 3);
    const sinkRun = async (batch: CanonicalEvent[]) => {
      await produce(h, batch);
      // A new sink reads the venue's plan afresh (a running one within its context TTL).
      const group = `telemetry-plan-${Date.now()}`;
      const sink = await startSink(h, group);
      await allCommitted(h, group, 60_000);
      await sink.stop();
    };
    await sinkRun(before);
    const changed = await request(`${api.url}/api/operators/${changer.id}/plan`, { method: 'PUT', headers: admin, json: { plan: 'pro' } });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    await sinkRun(after);
    // Whole-venue occupancy comes from the history derived from the raw table, here in a class of its own.
    await h.ch.insert({
      table: 'derived_occupancy',
      format: 'JSONEachRow',
      values: [
        {
          operator_id: changer.id,
          venue_id: venueId,
          ts: (hour + 5 * MINUTE) / 1000,
          ts_ms: 0,
          local_day: new Date(hour).toISOString().slice(0, 10),
          value: 42,
          retention_days: 7,
          live: 1,
          version: 1,
        },
      ],
    });
    const classes = await h.ch.query({
      query: `SELECT DISTINCT d FROM (SELECT retention_days AS d FROM telemetry_1m WHERE venue_id = toUUID('${venueId}')
                                     UNION ALL SELECT retention_days AS d FROM derived_occupancy WHERE venue_id = toUUID('${venueId}')) ORDER BY d`,
      format: 'JSONEachRow',
    });
    expect(
      ((await classes.json()) as Array<{ d: number }>).map((r) => r.d),
      'the rows really are in three classes',
    ).toEqual([7, 90, 365]);

    const all = [...before, ...after];
    const day = today - 2 * DAY;
    for (const [interval, startTs, endTs, bucketOf] of [
      [MINUTE, hour, hour + HOUR, epochBucketer(hour, hour + HOUR, MINUTE)],
      [HOUR, hour, hour + HOUR, epochBucketer(hour, hour + HOUR, HOUR)],
      [DAY, day, day + DAY, dayBucketer(day, day + DAY, 1, UTC)],
    ] as const) {
      const res = await telemetry(
        venueId,
        { keys: 'temperature,entries,devices,occupancy', startTs, endTs, interval, agg: 'SUM' },
        changer.key,
      );
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      for (const key of ['temperature', 'entries', 'devices'])
        expectSeries(res.body[key], expectedSeries(all, key, 'SUM', bucketOf), `${key} every ${interval} ms`);
      expect(
        res.body.occupancy.map((p: { value: number }) => p.value),
        `occupancy every ${interval} ms`,
      ).toEqual([42]);
    }
  });
});
