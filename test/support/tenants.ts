import type Router from '@koa/router';
import { expect } from 'vitest';
import { createApp } from '../../apps/api/app.js';
import type { RunningApi } from './env.js';
import { request } from './http.js';

export interface TestOperator {
  id: string;
  key: string;
}

/** A new operator through the admin endpoints (plan defaults to free; enterprise is set by the admin afterwards). */
export async function newOperator(api: RunningApi, plan: 'free' | 'starter' | 'pro' | 'enterprise' = 'free'): Promise<TestOperator> {
  const admin = { 'x-admin-key': api.services.cfg.ADMIN_SECRET };
  const res = await request(`${api.url}/api/operators`, {
    headers: admin,
    json: { name: `op-${plan}`, email: `${plan}-${Date.now()}@example.com`, plan: plan === 'enterprise' ? 'pro' : plan },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  if (plan === 'enterprise') {
    const set = await request(`${api.url}/api/operators/${res.body.operator_id}/plan`, { method: 'PUT', headers: admin, json: { plan } });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
  }
  return { id: res.body.operator_id, key: res.body.api_key };
}

/** A new venue of the key's operator; returns the 201 body (id, name, timezone, ...). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function newVenue(api: RunningApi, key: string, body: Record<string, unknown> = {}): Promise<any> {
  const res = await request(`${api.url}/api/venues`, { key, json: { name: 'Test venue', timezone: 'Europe/Berlin', ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

/** Every method + path the app's routers register (HEAD aside), read from a fresh app over the same deps. */
export function registeredRoutes(api: RunningApi): Array<{ method: string; path: string }> {
  const app = createApp(api.deps);
  const routes: Array<{ method: string; path: string }> = [];
  for (const mw of app.middleware as Array<{ router?: Router }>) {
    for (const layer of mw.router?.stack ?? []) {
      for (const method of layer.methods) if (method !== 'HEAD') routes.push({ method, path: String(layer.path) });
    }
  }
  return routes;
}
