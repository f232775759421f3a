import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATIONS } from '../../apps/api/operations/index.js';
import { startApi, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator } from '../support/tenants.js';

let api1: RunningApi;
let api2: RunningApi;
beforeAll(async () => {
  [api1, api2] = await Promise.all([startApi(), startApi()]);
});
afterAll(async () => {
  await Promise.all([api1.close(), api2.close()]);
});

const KEY_SHAPED = 'vt_live_' + 'A'.repeat(28);

/** Every documented bearer route, with path parameters filled in. */
const bearerRoutes = () =>
  OPERATIONS.filter((d) => d.auth === 'bearer').map((d) => ({
    method: d.method.toUpperCase(),
    path: d.path.replace(/\{[^}]+\}/g, randomUUID()),
  }));

describe('bearer authentication', () => {
  it('leaves the public endpoints open', async () => {
    for (const path of ['/health', '/api/status', '/openapi.json']) expect((await request(`${api1.url}${path}`)).status, path).toBe(200);
  });

  it('answers 401 UNAUTHORIZED in the envelope on every bearer route for a missing, malformed, unknown or garbage key', async () => {
    const routes = bearerRoutes();
    expect(routes.length).toBeGreaterThan(2);
    const headerSets: Array<Record<string, string>> = [
      {},
      { authorization: '' },
      { authorization: 'Bearer' },
      { authorization: 'Bearer ' },
      { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
      { authorization: `Bearer ${KEY_SHAPED} extra` },
      { authorization: KEY_SHAPED },
      { authorization: `Bearer ${KEY_SHAPED}` },
      { authorization: 'Bearer not-a-key' },
      { authorization: `Bearer ${'x'.repeat(5000)}` },
    ];
    for (const route of routes) {
      for (const headers of headerSets) {
        const init = route.method === 'GET' || route.method === 'DELETE' ? {} : { json: {} };
        const res = await request(`${api1.url}${route.path}`, { method: route.method, headers, ...init });
        expect(res.status, `${route.method} ${route.path} ${JSON.stringify(headers).slice(0, 80)}`).toBe(401);
        expect(res.body).toEqual({ error: expect.any(String), code: 'UNAUTHORIZED' });
      }
    }
  });

  it('tells a malformed header from a missing one', async () => {
    const missing = await request(`${api1.url}/api/keys`);
    expect(missing.body.error).toMatch(/missing/);
    const malformed = await request(`${api1.url}/api/keys`, { headers: { authorization: 'Token abc' } });
    expect(malformed.body.error).toMatch(/malformed/);
  });

  it('accepts the scheme case-insensitively', async () => {
    const op = await newOperator(api1);
    expect((await request(`${api1.url}/api/keys`, { headers: { authorization: `bearer ${op.key}` } })).status).toBe(200);
  });

  it("shows an operator only its own keys' metadata", async () => {
    const [a, b] = await Promise.all([newOperator(api1), newOperator(api1)]);
    const res = await request(`${api1.url}/api/keys`, { key: a.key });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([
      { id: expect.any(String), api_key_prefix: 'vt_live_', last4: a.key.slice(-4), created_at: expect.any(String), revoked_at: null },
    ]);
    expect(JSON.stringify(res.body)).not.toContain(b.key.slice(-4) + '"');
  });
});

describe('key rotation across two instances', () => {
  it('refuses the old key on both instances at once and accepts the new one on both', async () => {
    const op = await newOperator(api1);
    for (const api of [api1, api2]) expect((await request(`${api.url}/api/keys`, { key: op.key })).status).toBe(200);

    const rotated = await request(`${api1.url}/api/keys/rotate`, { method: 'POST', key: op.key });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toEqual({
      operator_id: op.id,
      api_key: expect.stringMatching(/^vt_live_[A-Za-z0-9]{28}$/),
      api_key_prefix: 'vt_live_',
      rotated_at: expect.any(String),
    });
    expect(Math.abs(Date.parse(rotated.body.rotated_at) - Date.now())).toBeLessThan(60_000);

    const [old1, old2, new1, new2] = await Promise.all([
      request(`${api1.url}/api/keys`, { key: op.key }),
      request(`${api2.url}/api/keys`, { key: op.key }),
      request(`${api1.url}/api/keys`, { key: rotated.body.api_key }),
      request(`${api2.url}/api/keys`, { key: rotated.body.api_key }),
    ]);
    for (const old of [old1, old2]) {
      expect(old.status).toBe(401);
      expect(old.body).toEqual({ error: expect.stringMatching(/rotated/), code: 'UNAUTHORIZED' });
    }
    expect(new1.status).toBe(200);
    expect(new2.status).toBe(200);
    expect(new2.body.data).toHaveLength(2);
    expect(new2.body.data[0]).toMatchObject({ last4: rotated.body.api_key.slice(-4), revoked_at: null });
    expect(new2.body.data[1]).toMatchObject({ last4: op.key.slice(-4), revoked_at: rotated.body.rotated_at });

    // The old key cannot rotate again; the new one can, on the other instance.
    expect((await request(`${api2.url}/api/keys/rotate`, { method: 'POST', key: op.key })).status).toBe(401);
    const again = await request(`${api2.url}/api/keys/rotate`, { method: 'POST', key: rotated.body.api_key });
    expect(again.status).toBe(200);
    expect((await request(`${api1.url}/api/keys`, { key: rotated.body.api_key })).status).toBe(401);
    expect((await request(`${api1.url}/api/keys`, { key: again.body.api_key })).status).toBe(200);
  });

  it('lets exactly one of several concurrent rotations with the same key win', async () => {
    const op = await newOperator(api1);
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => request(`${(i % 2 ? api2 : api1).url}/api/keys/rotate`, { method: 'POST', key: op.key })),
    );
    const winners = results.filter((r) => r.status === 200);
    expect(winners).toHaveLength(1);
    expect(results.filter((r) => r.status === 401)).toHaveLength(5);
    const { rows } = await api1.services.db.query(
      `SELECT count(*) FILTER (WHERE revoked_at IS NULL) AS live FROM api_keys WHERE operator_id = $1`,
      [op.id],
    );
    expect(rows[0].live).toBe(1);
    expect((await request(`${api2.url}/api/keys`, { key: winners[0]!.body.api_key })).status).toBe(200);
  });

  it('also refuses the old key everywhere after an admin rotation', async () => {
    const op = await newOperator(api2);
    const res = await request(`${api2.url}/api/operators/${op.id}/rotate-key`, {
      method: 'POST',
      headers: { 'x-admin-key': api2.services.cfg.ADMIN_SECRET },
    });
    expect(res.status).toBe(200);
    for (const api of [api1, api2]) {
      expect((await request(`${api.url}/api/keys`, { key: op.key })).status).toBe(401);
      expect((await request(`${api.url}/api/keys`, { key: res.body.api_key })).status).toBe(200);
    }
  });
});
