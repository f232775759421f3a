import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATIONS } from '../../apps/api/operations/index.js';
import { chRows, chsql, scopedSettings } from '../../clickhouse/client.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { parseInput } from '../../lib/validate.js';
import { QueryGate } from '../../domain/limits/query-gate.js';
import { LARGE_READ_SETTINGS } from '../../domain/limits/query-limits.js';
import { AppError } from '../../lib/errors.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { event } from '../pipeline/harness.js';

const refusal = async (p: Promise<unknown>): Promise<AppError> => {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  return err as AppError;
};

describe('the query gate', () => {
  it('runs an operator’s expensive reads a few at a time and lets another operator’s pass meanwhile', async () => {
    const gate = new QueryGate({ perOperator: 2, total: 10, maxWaiting: 10, maxWaitMs: 5_000 });
    const a1 = await gate.acquire('a');
    await gate.acquire('a');
    let third = false;
    const a3 = gate.acquire('a').then((release) => ((third = true), release));
    const b1 = await gate.acquire('b');
    expect(gate.load()).toEqual({ running: 3, waiting: 1 });
    await new Promise((r) => setTimeout(r, 10));
    expect(third).toBe(false);
    a1();
    a1(); // a second release of the same turn changes nothing
    (await a3)();
    b1();
    expect(gate.load()).toEqual({ running: 1, waiting: 0 });
  });

  it('hands freed slots to waiting operators in turn, not to the longest backlog', async () => {
    const gate = new QueryGate({ perOperator: 1, total: 1, maxWaiting: 10, maxWaitMs: 5_000 });
    const held = await gate.acquire('x');
    const order: string[] = [];
    // Each read gives its turn back as soon as it has it, so the next one follows.
    const wait = (op: string) =>
      gate.acquire(op).then((release) => {
        order.push(op);
        release();
      });
    const queued = [wait('a'), wait('a'), wait('a'), wait('b'), wait('c')];
    held();
    await Promise.all(queued);
    expect(order).toEqual(['a', 'b', 'c', 'a', 'a']);
  });

  it('gives a large read all of its operator’s turns, and keeps it in line ahead of the operator’s later reads', async () => {
    const gate = new QueryGate({ perOperator: 2, total: 10, maxWaiting: 10, maxWaitMs: 5_000 });
    const small = await gate.acquire('a');
    const order: string[] = [];
    const large = gate.acquire('a', undefined, Infinity).then((release) => (order.push('large'), release));
    const later = gate.acquire('a').then((release) => (order.push('later'), release));
    await new Promise((r) => setTimeout(r, 10));
    expect(order).toEqual([]);
    expect(gate.load()).toEqual({ running: 1, waiting: 2 });
    small();
    const releaseLarge = await large;
    expect(gate.load()).toEqual({ running: 2, waiting: 1 });
    releaseLarge();
    (await later)();
    expect(order).toEqual(['large', 'later']);
    expect(gate.load()).toEqual({ running: 0, waiting: 0 });
  });

  it('refuses a read that waits too long with 429 and Retry-After, or 503 when everyone’s reads fill the instance', async () => {
    const gate = new QueryGate({ perOperator: 1, total: 2, maxWaiting: 10, maxWaitMs: 50 });
    await gate.acquire('a');
    const own = await refusal(gate.acquire('a'));
    expect(own.status).toBe(429);
    expect(own.code).toBe('RATE_LIMITED');
    expect(own.headers['Retry-After']).toBe('1');
    expect(own.message).toMatch(/at most 1 at once/);
    await gate.acquire('b');
    const busy = await refusal(gate.acquire('c'));
    expect(busy.status).toBe(503);
    expect(busy.code).toBe('SERVICE_UNAVAILABLE');
    expect(busy.headers['Retry-After']).toBe('1');
    expect(gate.load()).toEqual({ running: 2, waiting: 0 });
  });

  it('refuses at once past the operator’s waiting line, and forgets a read whose client went away', async () => {
    const gate = new QueryGate({ perOperator: 1, total: 5, maxWaiting: 1, maxWaitMs: 5_000 });
    const held = await gate.acquire('a');
    const gone = new AbortController();
    const waiting = gate.acquire('a', gone.signal);
    const full = await refusal(gate.acquire('a'));
    expect(full.status).toBe(429);
    expect(full.message).toMatch(/1 expensive queries of this operator are already waiting/);
    gone.abort();
    await refusal(waiting);
    expect(gate.load()).toEqual({ running: 1, waiting: 0 });
    held();
    expect(gate.load()).toEqual({ running: 0, waiting: 0 });
  });
});

describe('cost limits through the API', () => {
  let api: RunningApi;
  let busy: TestOperator;
  let quiet: TestOperator;
  let busyVenue: string;
  let quietVenue: string;
  const telemetry = (venue: string) =>
    `/api/venues/${venue}/telemetry?keys=temperature,co2&startTs=${Date.now() - 86_400_000}&endTs=${Date.now()}&interval=60000`;

  beforeAll(async () => {
    api = await startApi(testConfig({ EXPENSIVE_QUERIES_PER_OPERATOR: '1', EXPENSIVE_QUERY_MAX_WAIT_MS: '300' }));
    [busy, quiet] = await Promise.all([newOperator(api, 'pro'), newOperator(api, 'pro')]);
    busyVenue = (await newVenue(api, busy.key)).id;
    quietVenue = (await newVenue(api, quiet.key)).id;
  });
  afterAll(async () => {
    await api?.close();
  });

  it('makes an operator’s expensive read wait for its turn (429 with Retry-After past the wait) while its cheap reads and another operator’s reads go on', async () => {
    const held = await api.deps.queryGate.acquire(busy.id);
    try {
      const refused = await request(api.url + telemetry(busyVenue), { key: busy.key });
      expect(refused.status).toBe(429);
      expect(refused.body).toMatchObject({ code: 'RATE_LIMITED', details: { concurrentLimit: 1, retryAfter: 1 } });
      expect(refused.headers.get('retry-after')).toBe('1');
      for (const path of [
        '/api/dashboard/stats',
        '/api/dashboard/events?range=24h',
        `/api/venues/${busyVenue}/dwell`,
        `/api/venues/${busyVenue}/predictions/occupancy?dayOfWeek=1&hour=9`,
      ]) {
        expect((await request(api.url + path, { key: busy.key })).status, path).toBe(429);
      }
      expect((await request(`${api.url}/api/venues`, { key: busy.key })).status).toBe(200);
      expect((await request(`${api.url}/api/venues/${busyVenue}/occupancy`, { key: busy.key })).status).toBe(200);
      expect((await request(api.url + telemetry(quietVenue), { key: quiet.key })).status).toBe(200);
      expect(await api.deps.metrics.registry.metrics()).toMatch(/expensive_queries\{[^}]*state="running"[^}]*\} 1\n/);
    } finally {
      held();
    }
    expect((await request(api.url + telemetry(busyVenue), { key: busy.key })).status).toBe(200);
    // The streamed answer gave its turn back once sent.
    expect(api.deps.queryGate.load()).toEqual({ running: 0, waiting: 0 });
  });

  it('holds a turn only while the read runs: a burst of reads from one operator is answered in full, one at a time', async () => {
    const answers = await Promise.all(Array.from({ length: 8 }, () => request(api.url + telemetry(busyVenue), { key: busy.key })));
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
  });

  it('answers a read stopped by a ClickHouse per-query limit with 503, Retry-After and what to narrow', async () => {
    const limited = await startApi(testConfig({ QUERY_MAX_ROWS_TO_READ: '1000' }));
    try {
      const now = Date.now();
      const rows = Array.from({ length: 3_000 }, (_, i) =>
        toRow(
          event({ operatorId: busy.id, venueId: busyVenue, ts: now - 3_600_000 + i * 1000, metrics: { temperature: 20 } }),
          { topic: 'query-cost-test', partition: 0, offset: String(i), index: 0 },
          { timezone: 'UTC', retentionDays: 90 },
        ),
      );
      await insertEvents(api.services.ch, rows);
      const res = await request(`${limited.url}/api/dashboard/stats`, { key: busy.key });
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      expect(res.body).toMatchObject({ code: 'SERVICE_UNAVAILABLE', details: { limit: 'rows read', retryAfter: 5 } });
      expect(res.body.error).toMatch(/shorter range/);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(limited.deps.queryGate.load()).toEqual({ running: 0, waiting: 0 });
      // Within the default limits the same question is answered.
      const full = await request(`${api.url}/api/dashboard/stats`, { key: busy.key });
      expect(full.status).toBe(200);
      expect(full.body.events24h).toBeGreaterThanOrEqual(3_000);
    } finally {
      await limited.close();
    }
  });

  it('sends every api statement with the read limits at normal priority, and a large read at the lower one', async () => {
    const settingOf = async (ch: typeof api.services.ch, name: string) =>
      (await chRows<{ value: string }>(ch, chsql`SELECT value FROM system.settings WHERE name = ${name}`))[0]!.value;
    const setting = (name: string) => settingOf(api.deps.services.ch, name);
    expect(await setting('priority')).toBe('1');
    expect(await setting('max_execution_time')).toBe('15');
    expect(await setting('max_rows_to_read')).toBe('300000000');
    expect(await scopedSettings.run(LARGE_READ_SETTINGS, () => Promise.all([setting('priority'), setting('max_threads')]))).toEqual([
      '2',
      '1',
    ]);
    // The engines' own client, as the pipeline has it, is outside the scheme.
    expect(await settingOf(api.services.ch, 'priority')).toBe('0');

    const op = (id: string) => OPERATIONS.find((o) => o.id === id)!;
    const large = (id: string, query: Record<string, string>) => op(id).large!(parseInput(op(id).query!, query, 'query'));
    const now = Date.now();
    const week = { startTs: String(now - 14 * 86_400_000), endTs: String(now) };
    expect(
      large('getTelemetry', { keys: 'occupancy,temperature,co2,humidity,noise,entries,exits,devices', ...week, interval: '60000' }),
    ).toBe(true);
    expect(large('getTelemetry', { keys: 'occupancy', startTs: String(now - 86_400_000), endTs: String(now), interval: '3600000' })).toBe(
      false,
    );
    expect(large('getTelemetry', { keys: 'occupancy', ...week, interval: '3600000' })).toBe(false);
    expect(large('getDwell', { range: '90d' })).toBe(true);
    expect(large('getDwell', { range: '24h' })).toBe(false);
    expect(large('getVisitorScoring', { range: '30d' })).toBe(true);
    expect(large('getDashboardEvents', { range: '7d' })).toBe(false);
  });
});
