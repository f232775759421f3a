import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { tcpProxy } from '../support/tcp-proxy.js';

let api: RunningApi;
beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  await api.close();
});

describe('GET /health', () => {
  it('reports every member connected with measured latencies, without a key', async () => {
    const { status, body } = await request(`${api.url}/health`);
    expect(status).toBe(200);
    expect(body.status).toBe('healthy');
    for (const member of ['db', 'redis', 'kafka', 'clickhouse']) {
      expect(body[member].connected, member).toBe(true);
      expect(typeof body[member].latencyMs).toBe('number');
      expect(body[member].latencyMs).toBeGreaterThanOrEqual(0);
    }
    expect(body.stats).toEqual({
      lastEventAt: body.stats.lastEventAt === null ? null : new Date(body.stats.lastEventAt).toISOString(),
      operatorCount: expect.any(Number),
      venueCount: expect.any(Number),
      eventsPerMin: expect.any(Number),
    });
    expect(Number.isInteger(body.uptime)).toBe(true);
  });

  it('counts operators and active venues, and reports the latest venue event, from Postgres', async () => {
    const before = (await request(`${api.url}/health`)).body.stats;
    const { rows } = await api.services.db.query(`INSERT INTO operators (name, email) VALUES ('h', 'h@example.com') RETURNING id`);
    // Later than any event another suite of the run may have stored (they reach minutes ahead at most).
    const latest = new Date(Date.now() + 365 * 86_400_000);
    await api.services.db.query(`INSERT INTO venues (operator_id, name, timezone, last_event_at) VALUES ($1, 'v', 'UTC', $2)`, [
      rows[0].id,
      latest,
    ]);
    const after = (await request(`${api.url}/health`)).body.stats;
    expect(after.operatorCount).toBe(before.operatorCount + 1);
    expect(after.venueCount).toBe(before.venueCount + 1);
    expect(after.lastEventAt).toBe(latest.toISOString());
  });

  it('reports Redis as disconnected (and the service degraded) when Redis is away', async () => {
    api.services.redis.disconnect();
    const { body } = await request(`${api.url}/health`);
    expect(body.redis.connected).toBe(false);
    expect(body.redis.mode).toBe('local-fallback');
    expect(body.status).toBe('degraded');
    await api.services.redis.connect();
  });

  it('still answers, promptly, while Redis hangs (connected but silent)', async () => {
    const proxy = await tcpProxy(api.services.cfg.REDIS_URL);
    const hung = await startApi(testConfig({ REDIS_URL: proxy.url }));
    try {
      expect((await request(`${hung.url}/health`)).body.redis.connected).toBe(true);
      proxy.hold();
      const started = Date.now();
      const answer = await Promise.race([
        request(`${hung.url}/health`),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('/health gave no answer within 8 s')), 8000)),
      ]);
      expect(answer.status).toBe(200);
      expect(answer.body.redis).toMatchObject({ connected: false, mode: 'local-fallback' });
      expect(answer.body.stats.eventsPerMin).toEqual(expect.any(Number));
      expect(Date.now() - started).toBeLessThan(4000);
    } finally {
      await hung.close();
      await proxy.close();
    }
  });
});

describe('GET /api/status', () => {
  it('has exactly the spec shape and no infrastructure internals', async () => {
    const { status, body } = await request(`${api.url}/api/status`);
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['checkedAt', 'eventsPerMin', 'status', 'uptime', 'venueCount']);
    expect(body.status).toBe('operational');
    expect(new Date(body.checkedAt).toISOString()).toBe(body.checkedAt);
    expect(Number.isInteger(body.venueCount)).toBe(true);
  });
});

describe('the error envelope', () => {
  it('answers an unknown route with 404 NOT_FOUND in the envelope', async () => {
    const res = await request(`${api.url}/nope`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: expect.stringContaining('/nope'), code: 'NOT_FOUND' });
  });

  it('answers a wrong method with 405 in the envelope', async () => {
    const res = await request(`${api.url}/health`, { method: 'DELETE' });
    expect(res.status).toBe(405);
    expect(res.body.code).toBe('METHOD_NOT_ALLOWED');
  });
});
