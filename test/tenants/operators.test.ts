import { createHash, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../lib/logger.js';
import { closeServices, createServices } from '../../apps/shared/services.js';
import { createApp } from '../../apps/api/app.js';
import { createApiDeps } from '../../apps/api/deps.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator } from '../support/tenants.js';

let api: RunningApi;
let admin: Record<string, string>;
beforeAll(async () => {
  api = await startApi();
  admin = { 'x-admin-key': api.services.cfg.ADMIN_SECRET };
});
afterAll(async () => {
  await api.close();
});

const create = (json: unknown, headers: Record<string, string> = admin) => request(`${api.url}/api/operators`, { headers, json });

describe('POST /api/operators', () => {
  it('creates an operator and returns its key once, with the prefix', async () => {
    const res = await create({ name: 'Acme Venues', email: 'ops@acme.example' });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['api_key', 'api_key_prefix', 'operator_id']);
    expect(res.body.operator_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.body.api_key_prefix).toBe('vt_live_');
    expect(res.body.api_key).toMatch(/^vt_live_[A-Za-z0-9]{28}$/);
    const { rows } = await api.services.db.query(`SELECT plan FROM operators WHERE id = $1`, [res.body.operator_id]);
    expect(rows[0].plan).toBe('free');
  });

  it('stores only the SHA-256 of the key, never the key', async () => {
    const res = await create({ name: 'Hashed', email: 'h@example.com', plan: 'pro' });
    const { rows } = await api.services.db.query(`SELECT * FROM api_keys WHERE operator_id = $1`, [res.body.operator_id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].key_hash.equals(createHash('sha256').update(res.body.api_key).digest())).toBe(true);
    expect(JSON.stringify(rows[0])).not.toContain(res.body.api_key.slice(8));
    expect(rows[0].last4).toBe(res.body.api_key.slice(-4));
  });

  it('gives every operator a different key', async () => {
    const keys = await Promise.all(Array.from({ length: 5 }, (_, i) => create({ name: `n${i}`, email: `n${i}@example.com` })));
    expect(new Set(keys.map((k) => k.body.api_key)).size).toBe(5);
  });

  it('refuses a missing or wrong X-Admin-Key with 401 UNAUTHORIZED, before looking at the body', async () => {
    const attempts: Array<Record<string, string>> = [
      {},
      { 'x-admin-key': 'wrong' },
      { 'x-admin-key': api.services.cfg.ADMIN_SECRET + 'x' },
      { 'x-admin-key': '' },
    ];
    for (const headers of attempts) {
      const res = await create({ nonsense: true }, headers);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: expect.any(String), code: 'UNAUTHORIZED' });
    }
    // A bearer key is not an admin key.
    const op = await newOperator(api);
    const res = await request(`${api.url}/api/operators`, { key: op.key, json: { name: 'x', email: 'x@example.com' } });
    expect(res.status).toBe(401);
  });

  it('answers a bad body with 400 VALIDATION_ERROR naming each bad field', async () => {
    const res = await create({ name: '', email: 'not-an-email', plan: 'gold' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_ERROR');
    expect(res.body.details.map((d: { field: string }) => d.field).sort()).toEqual(['email', 'name', 'plan']);
    for (const body of [undefined, [], 'x', { name: 'x' }, { email: 'a@b.example' }]) {
      const r = body === undefined ? await request(`${api.url}/api/operators`, { method: 'POST', headers: admin }) : await create(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.code).toBe('VALIDATION_ERROR');
      expect(Array.isArray(r.body.details)).toBe(true);
    }
  });

  it('accepts only the self-service plans; enterprise is an admin plan change', async () => {
    expect((await create({ name: 'e', email: 'e@example.com', plan: 'enterprise' })).status).toBe(400);
    for (const plan of ['free', 'starter', 'pro'])
      expect((await create({ name: plan, email: `${plan}@example.com`, plan })).status).toBe(201);
  });
});

describe('POST /api/operators/:id/rotate-key (admin)', () => {
  it('issues a new key and refuses the old one at once', async () => {
    const op = await newOperator(api);
    const res = await request(`${api.url}/api/operators/${op.id}/rotate-key`, { method: 'POST', headers: admin });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      operator_id: op.id,
      api_key: expect.stringMatching(/^vt_live_[A-Za-z0-9]{28}$/),
      api_key_prefix: 'vt_live_',
      rotated_at: expect.any(String),
    });
    expect((await request(`${api.url}/api/keys`, { key: op.key })).status).toBe(401);
    expect((await request(`${api.url}/api/keys`, { key: res.body.api_key })).status).toBe(200);
  });

  it('needs the admin key, a uuid and an existing operator', async () => {
    const op = await newOperator(api);
    expect((await request(`${api.url}/api/operators/${op.id}/rotate-key`, { method: 'POST', key: op.key })).status).toBe(401);
    const bad = await request(`${api.url}/api/operators/not-a-uuid/rotate-key`, { method: 'POST', headers: admin });
    expect(bad.status).toBe(400);
    expect(bad.body.details[0].field).toBe('id');
    const missing = await request(`${api.url}/api/operators/${randomUUID()}/rotate-key`, { method: 'POST', headers: admin });
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('NOT_FOUND');
  });
});

describe('PUT /api/operators/:id/plan (admin)', () => {
  it('moves an operator to any plan, Enterprise included, effective on the next request', async () => {
    const op = await newOperator(api);
    const res = await request(`${api.url}/api/operators/${op.id}/plan`, { method: 'PUT', headers: admin, json: { plan: 'enterprise' } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ operator_id: op.id, plan: 'enterprise', plan_name: 'Enterprise' });
    const usage = await request(`${api.url}/api/usage`, { key: op.key });
    expect(usage.body.planName).toBe('Enterprise');
    expect(usage.body.apiCalls.quota).toBeNull();
  });

  it('validates the plan and the operator', async () => {
    const op = await newOperator(api);
    const bad = await request(`${api.url}/api/operators/${op.id}/plan`, { method: 'PUT', headers: admin, json: { plan: 'platinum' } });
    expect(bad.status).toBe(400);
    expect(bad.body.details[0].field).toBe('plan');
    const missing = await request(`${api.url}/api/operators/${randomUUID()}/plan`, {
      method: 'PUT',
      headers: admin,
      json: { plan: 'pro' },
    });
    expect(missing.status).toBe(404);
    const noAdmin = await request(`${api.url}/api/operators/${op.id}/plan`, { method: 'PUT', key: op.key, json: { plan: 'pro' } });
    expect(noAdmin.status).toBe(401);
  });
});

describe('the API key in logs', () => {
  it('never appears in any log line, even at trace level', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString('utf8'));
        done();
      },
    });
    const cfg = testConfig();
    const log = createLogger('api-log-test', 'trace', sink);
    const services = await createServices(cfg, log);
    const server = createServer(createApp(createApiDeps(services)).callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const created = await request(`${url}/api/operators`, {
        headers: { 'x-admin-key': cfg.ADMIN_SECRET },
        json: { name: 'Log', email: 'log@example.com' },
      });
      const key: string = created.body.api_key;
      expect((await request(`${url}/api/keys`, { key })).status).toBe(200);
      expect((await request(`${url}/api/keys?limit=oops`, { key })).status).toBe(400);
      const rotated = await request(`${url}/api/keys/rotate`, { method: 'POST', key });
      const newKey: string = rotated.body.api_key;
      expect((await request(`${url}/api/keys`, { key })).status).toBe(401);
      expect((await request(`${url}/api/keys`, { key: newKey })).status).toBe(200);
      // A logged object carrying a key is redacted wherever the key sits.
      log.info({ api_key: newKey, body: { api_key: newKey }, headers: { authorization: `Bearer ${newKey}` } }, 'redaction probe');

      const all = lines.join('');
      expect(lines.length).toBeGreaterThan(5);
      expect(all).toContain('"path":"/api/keys"');
      expect(all).toContain('redaction probe');
      for (const secret of [key, newKey, cfg.ADMIN_SECRET]) {
        expect(all).not.toContain(secret);
        expect(all).not.toContain(secret.slice(8));
      }
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await closeServices(services);
    }
  });
});
