import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RateLimiter, RATE_LIMITS } from '../../domain/limits/rate-limit.js';
import { OPERATIONS } from '../../apps/api/operations/index.js';
import { meteringOf } from '../../apps/api/operations/operation.js';
import { createRedis } from '../../lib/redis.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request, type JsonResponse } from '../support/http.js';
import { newOperator } from '../support/tenants.js';
import { freshWindow } from '../support/windows.js';

const small = { ingest: 5, api: 10 };
// 45.3 s into an epoch minute: 14.7 s left, so Reset / Retry-After say 15.
const T0 = Date.UTC(2030, 0, 1, 12, 0, 45, 300);

describe('RateLimiter against real Redis', () => {
  const redis = createRedis(testConfig());
  beforeAll(() => redis.connect());
  afterAll(() => redis.disconnect());

  it('allows the limit per fixed window, then refuses, with remaining and reset figures', async () => {
    let now = T0;
    const limiter = new RateLimiter(redis, { limits: small, now: () => now });
    const op = randomUUID();
    const decisions = [];
    for (let i = 0; i < 11; i++) decisions.push(await limiter.hit(op, 'api'));
    expect(decisions.slice(0, 10).every((d) => d.allowed)).toBe(true);
    expect(decisions.map((d) => d.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]);
    expect(decisions[10]).toEqual({ allowed: false, limit: 10, remaining: 0, resetSeconds: 15, mode: 'shared' });
    // Still refused until the window's last millisecond; a new minute starts afresh.
    now = T0 + 14_699;
    expect(await limiter.hit(op, 'api')).toMatchObject({ allowed: false, resetSeconds: 1 });
    now = T0 + 14_700;
    expect(await limiter.hit(op, 'api')).toMatchObject({ allowed: true, remaining: 9, resetSeconds: 60 });
  });

  it('keeps buckets and operators apart', async () => {
    const limiter = new RateLimiter(redis, { limits: small, now: () => T0 });
    const [a, b] = [randomUUID(), randomUUID()];
    for (let i = 0; i < 5; i++) expect((await limiter.hit(a, 'ingest')).allowed).toBe(true);
    expect((await limiter.hit(a, 'ingest')).allowed).toBe(false);
    expect(await limiter.hit(a, 'api')).toMatchObject({ allowed: true, remaining: 9 });
    expect(await limiter.hit(b, 'ingest')).toMatchObject({ allowed: true, remaining: 4 });
  });

  it('shares one count between limiters (instances) through Redis, atomically', async () => {
    const other = createRedis(testConfig());
    await other.connect();
    const l1 = new RateLimiter(redis, { limits: small, now: () => T0 });
    const l2 = new RateLimiter(other, { limits: small, now: () => T0 });
    const op = randomUUID();
    const decisions = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? l1 : l2).hit(op, 'api')));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(10);
    expect(
      decisions
        .map((d) => d.remaining)
        .sort((x, y) => y - x)
        .slice(0, 10),
    ).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    other.disconnect();
  });

  it('sets an expiry on every counter key', async () => {
    const limiter = new RateLimiter(redis, { limits: small });
    const op = randomUUID();
    await limiter.hit(op, 'api');
    // ioredis namespaces command keys but not KEYS patterns, nor the keys KEYS answers with.
    const prefix = testConfig().REDIS_KEY_PREFIX;
    const keys = await redis.keys(`${prefix}rl:api:${op}:*`);
    expect(keys).toHaveLength(1);
    const ttl = await redis.pttl(keys[0]!.slice(prefix.length));
    expect(ttl).toBeGreaterThan(60_000);
    expect(ttl).toBeLessThanOrEqual(120_000);
  });

  it('counts in memory, per limiter, while its Redis is unreachable', async () => {
    const away = createRedis(testConfig()); // never connected
    let now = T0;
    const l1 = new RateLimiter(away, { limits: small, now: () => now });
    const l2 = new RateLimiter(away, { limits: small, now: () => now });
    const op = randomUUID();
    for (let i = 0; i < 10; i++) expect(await l1.hit(op, 'api')).toMatchObject({ allowed: true, mode: 'local-fallback' });
    expect(await l1.hit(op, 'api')).toMatchObject({ allowed: false, resetSeconds: 15, mode: 'local-fallback' });
    expect((await l2.hit(op, 'api')).allowed).toBe(true);
    now += 60_000;
    expect(await l1.hit(op, 'api')).toMatchObject({ allowed: true, remaining: 9 });
    away.disconnect();
  });

  it('remembers a key refused in this window, and forgets it when the window ends', async () => {
    let now = T0;
    const limiter = new RateLimiter(redis, { limits: small, now: () => now });
    expect(limiter.refusedEarlier('digest', 'api')).toBeUndefined();
    limiter.noteRefused('digest', 'api');
    expect(limiter.refusedEarlier('digest', 'api')).toMatchObject({ allowed: false, limit: 10, remaining: 0, resetSeconds: 15 });
    expect(limiter.refusedEarlier('digest', 'ingest')).toBeUndefined();
    expect(limiter.refusedEarlier('other', 'api')).toBeUndefined();
    now = T0 + 14_700;
    expect(limiter.refusedEarlier('digest', 'api')).toBeUndefined();
  });

  it('uses the spec limits by default, and the ingest bucket only for POST /ingest', () => {
    expect(RATE_LIMITS).toEqual({ ingest: 100, api: 1000 });
    const ingestBucket = OPERATIONS.filter((op) => meteringOf(op)?.rate === 'ingest').map((op) => `${op.method} ${op.path}`);
    expect(ingestBucket).toEqual(['post /ingest']);
    const apiBucket = OPERATIONS.filter((op) => meteringOf(op)?.rate === 'api');
    expect(apiBucket.length).toBe(OPERATIONS.filter((op) => op.auth === 'bearer').length - 1);
  });
});

/** Runs `n` GETs, `concurrency` at a time, spread round-robin over the instances. */
async function burst(apis: RunningApi[], path: string, key: string, n: number, concurrency = 16): Promise<JsonResponse[]> {
  const out: JsonResponse[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await request(`${apis[i % apis.length]!.url}${path}`, { key });
      }
    }),
  );
  return out;
}

const rateHeaders = (r: JsonResponse) => ({
  limit: r.headers.get('ratelimit-limit'),
  remaining: r.headers.get('ratelimit-remaining'),
  reset: r.headers.get('ratelimit-reset'),
});

describe('rate limits through the API (real limits)', () => {
  let api1: RunningApi;
  let api2: RunningApi;
  beforeAll(async () => {
    [api1, api2] = await Promise.all([startApi(), startApi()]);
  });
  afterAll(async () => {
    await Promise.all([api1.close(), api2.close()]);
  });

  it('shares 1,000/min per operator across two instances: the 1,001st request is a 429 with Retry-After', async () => {
    await freshWindow(25);
    const [op, bystander] = await Promise.all([newOperator(api1), newOperator(api1)]);
    const responses = await burst([api1, api2], '/api/keys', op.key, 1000);
    expect(responses.filter((r) => r.status === 200)).toHaveLength(1000);
    const remaining = responses.map((r) => Number(r.headers.get('ratelimit-remaining'))).sort((a, b) => a - b);
    expect(remaining).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    for (const r of responses) expect(r.headers.get('ratelimit-limit')).toBe('1000');

    for (const api of [api2, api1]) {
      const refused = await request(`${api.url}/api/keys`, { key: op.key });
      const expectedReset = Math.ceil((60_000 - (Date.now() % 60_000)) / 1000);
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({
        error: expect.stringMatching(/1000 requests per minute/),
        code: 'RATE_LIMITED',
        details: { limit: 1000, windowSeconds: 60, retryAfter: expect.any(Number) },
      });
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(Math.abs(retryAfter - expectedReset)).toBeLessThanOrEqual(1);
      expect(rateHeaders(refused)).toEqual({ limit: '1000', remaining: '0', reset: String(retryAfter) });
      expect(refused.body.details.retryAfter).toBe(retryAfter);
    }
    // From now on the key is refused from each instance's memory: the shared counter stops moving,
    // and the answer is the same 429.
    const counter = () => api1.services.redis.get(`rl:api:${op.id}:${Math.floor(Date.now() / 60_000)}`);
    const counted = await counter();
    const again = await burst([api1, api2], '/api/keys', op.key, 50);
    expect(again.every((r) => r.status === 429 && r.body.code === 'RATE_LIMITED' && Number(r.headers.get('retry-after')) >= 1)).toBe(true);
    expect(await counter()).toBe(counted);
    // Another operator, and the public endpoints, are untouched.
    expect((await request(`${api1.url}/api/keys`, { key: bystander.key })).status).toBe(200);
    for (const path of ['/health', '/api/status', '/openapi.json']) {
      const res = await request(`${api1.url}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBeNull();
    }
  });

  it('gives POST /ingest its own 100/min bucket across both instances: the 101st is a 429', async () => {
    await freshWindow(15);
    const op = await newOperator(api1);
    // Invalid bodies are enough: the limit is taken before the handler validates anything.
    const post = (api: RunningApi) => request(`${api.url}/ingest`, { key: op.key, json: { events: [] } });
    const responses = await Promise.all(Array.from({ length: 100 }, (_, i) => post(i % 2 ? api1 : api2)));
    expect(responses.every((r) => r.status === 400 && r.headers.get('ratelimit-limit') === '100')).toBe(true);
    const refused = await post(api1);
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('RATE_LIMITED');
    expect(refused.body.error).toMatch(/100 ingest requests per minute/);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The rest of the API is a separate bucket.
    const other = await request(`${api2.url}/api/keys`, { key: op.key });
    expect(other.status).toBe(200);
    expect(other.headers.get('ratelimit-remaining')).toBe('999');
  });

  it('puts the headers on every limited response, errors included, and counts from the window start', async () => {
    await freshWindow(5);
    const op = await newOperator(api1);
    const ok = await request(`${api1.url}/api/keys`, { key: op.key });
    const bad = await request(`${api2.url}/api/keys?limit=0`, { key: op.key });
    const wrongKey = await request(`${api1.url}/api/keys`, { key: 'vt_live_' + 'Z'.repeat(28) });
    expect(ok.status).toBe(200);
    expect(bad.status).toBe(400);
    expect(rateHeaders(ok)).toMatchObject({ limit: '1000', remaining: '999' });
    expect(rateHeaders(bad)).toMatchObject({ limit: '1000', remaining: '998' });
    const reset = Number(ok.headers.get('ratelimit-reset'));
    expect(reset).toBeGreaterThanOrEqual(1);
    expect(reset).toBeLessThanOrEqual(60);
    // Unauthenticated requests are not limited (there is no operator to count against).
    expect(wrongKey.status).toBe(401);
    expect(wrongKey.headers.get('ratelimit-limit')).toBeNull();
  });

  it('falls back to per-instance counting while Redis is away, and /health says so', async () => {
    await freshWindow(20);
    const op = await newOperator(api1);
    api1.services.redis.disconnect();
    try {
      const health = await request(`${api1.url}/health`);
      expect(health.body.redis).toMatchObject({ connected: false, mode: 'local-fallback' });
      const responses = await burst([api1], '/api/keys', op.key, 1000);
      expect(responses.filter((r) => r.status === 200)).toHaveLength(1000);
      const refused = await request(`${api1.url}/api/keys`, { key: op.key });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      // The other instance still counts in Redis, where this operator has used nothing.
      const elsewhere = await request(`${api2.url}/api/keys`, { key: op.key });
      expect(elsewhere.status).toBe(200);
      expect(elsewhere.headers.get('ratelimit-remaining')).toBe('999');
    } finally {
      await api1.services.redis.connect();
    }
    expect((await request(`${api1.url}/health`)).body.redis.mode).toBe('shared');
  });

  it('sends no limit headers and refuses nothing when RATE_LIMITS_ENABLED is false', async () => {
    const unlimited = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
    try {
      const op = await newOperator(unlimited);
      const res = await request(`${unlimited.url}/api/keys`, { key: op.key });
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBeNull();
    } finally {
      await unlimited.close();
    }
  });
});
