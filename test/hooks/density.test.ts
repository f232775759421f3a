import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_DELIVERIES_PER_MINUTE } from '../../domain/ingest/receivers/index.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { deliver, expectNothingStored, newIntegration, sleep, startHookStack, waitForStored, type HookStack } from './support.js';

let stack: HookStack;
let op: TestOperator;
beforeAll(async () => {
  stack = await startHookStack();
  op = await newOperator(stack.api, 'pro');
});
afterAll(async () => {
  await stack?.close();
});

const HEADER = 'X-Density-Token';
const VALUE = 'density-shared-header-value';

async function densityVenue(): Promise<{ venueId: string; hookId: string }> {
  const venueId = (await newVenue(stack.api, op.key)).id;
  return {
    venueId,
    hookId: await newIntegration(stack.api, op.key, venueId, 'density', {
      api_token: 'tok_1',
      webhook_header_name: HEADER,
      webhook_header_value: VALUE,
    }),
  };
}

const auth = { [HEADER]: VALUE };

describe('POST /hooks/{id}: Density', () => {
  it("stores the documented count webhook as entry / exit with Density's count, at the time of receipt", async () => {
    const { venueId, hookId } = await densityVenue();
    const before = Date.now();
    const entry = await deliver(
      stack.api,
      hookId,
      JSON.stringify({ space_id: 'spc_1234', doorway_id: 'drw_5678', direction: 1, count: 37 }),
      auth,
    );
    expect(entry.status, JSON.stringify(entry.body)).toBe(200);
    expect(entry.body).toEqual({ accepted: 1, rejected: 0, ignored: 0 });
    await deliver(stack.api, hookId, JSON.stringify({ space_id: 'spc_1234', doorway_id: 'drw_5678', direction: -1, count: 36 }), auth);
    const stored = await waitForStored(stack.api, venueId, 2);
    const byType = Object.fromEntries(stored.map((e) => [e.event_type, e]));
    expect(Object.keys(byType).sort()).toEqual(['entry', 'exit']);
    expect(byType.entry!.metric_names.map((n, i) => [n, byType.entry!.metric_values[i]]).sort()).toEqual([
      ['entries', 1],
      ['occupancy', 37],
    ]);
    expect(byType.exit!.metric_names.map((n, i) => [n, byType.exit!.metric_values[i]]).sort()).toEqual([
      ['exits', 1],
      ['occupancy', 36],
    ]);
    for (const e of stored) {
      expect(e.ts_ms).toBeGreaterThanOrEqual(before - 1000);
      expect(e.ts_ms).toBeLessThanOrEqual(Date.now());
    }
    expect(JSON.parse(byType.entry!.payload)).toEqual({ space_id: 'spc_1234', doorway_id: 'drw_5678', direction: 1, count: 37 });
  });

  it('uses a given id and timestamp: a re-delivery with the id is stored once', async () => {
    const { venueId, hookId } = await densityVenue();
    const timestamp = new Date(Date.now() - 90_000).toISOString();
    const raw = JSON.stringify({ id: 'evt_0001', timestamp, space_id: 'spc_1234', doorway_id: 'drw_5678', direction: 1, count: 5 });
    expect((await deliver(stack.api, hookId, raw, auth)).body.accepted).toBe(1);
    expect((await deliver(stack.api, hookId, raw, auth)).body.accepted).toBe(1);
    const [e] = await waitForStored(stack.api, venueId, 1);
    expect(e!.ts_ms).toBe(Date.parse(timestamp));
  });

  it('refuses a wrong or missing header with 401 and stores nothing; reports it', async () => {
    const { venueId, hookId } = await densityVenue();
    const raw = JSON.stringify({ space_id: 'spc_1234', doorway_id: 'drw_5678', direction: 1, count: 1 });
    const wrong = await deliver(stack.api, hookId, raw, { [HEADER]: 'guess' });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({
      error: `the ${HEADER} header does not match this integration's webhook_header_value`,
      code: 'UNAUTHORIZED',
    });
    expect((await deliver(stack.api, hookId, raw)).body.error).toContain('header is missing');
    await stack.reports.waitFor((r) => r.source?.integrationId === hookId && r.source.ok === false);
    await expectNothingStored(stack.api, venueId);
  });

  it('answers 400 naming direction for a body that is not a count webhook', async () => {
    const { hookId } = await densityVenue();
    const res = await deliver(stack.api, hookId, JSON.stringify({ space_id: 'spc_1234', direction: 2 }), auth);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: expect.any(String),
      code: 'VALIDATION_ERROR',
      details: [{ field: 'direction', message: 'expected 1 or -1' }],
    });
    const notJson = await request(`${stack.api.url}/hooks/${hookId}`, {
      method: 'POST',
      rawBody: 'direction=1',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...auth },
    });
    expect(notJson.status).toBe(400);
    expect(notJson.body.details[0].field).toBe('body');
  });

  it('takes an integration update within the 5 s the receiver keeps it', async () => {
    const { venueId, hookId } = await densityVenue();
    const raw = JSON.stringify({ direction: 1, count: 1 });
    expect((await deliver(stack.api, hookId, raw, auth)).status).toBe(200);
    const put = await request(`${stack.api.url}/api/venues/${venueId}/integrations/${hookId}`, {
      method: 'PUT',
      key: op.key,
      json: { config: { api_token: '[REDACTED]', webhook_header_name: HEADER, webhook_header_value: 'rotated-value' } },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const changed = Date.now();
    let status = 0;
    while (status !== 200 && Date.now() - changed < 8000) {
      status = (await deliver(stack.api, hookId, raw, { [HEADER]: 'rotated-value' })).status;
      if (status !== 200) await sleep(250);
    }
    expect(status).toBe(200);
    expect(Date.now() - changed).toBeLessThan(6000);
    expect((await deliver(stack.api, hookId, raw, auth)).status).toBe(401);
  });

  it('answers 404 to GET (only Meraki validates by GET)', async () => {
    const { hookId } = await densityVenue();
    const res = await request(`${stack.api.url}/hooks/${hookId}`);
    expect(res.status).toBe(404);
    expect(res.body.error).toContain('POST only');
  });

  it(`limits an integration to ${WEBHOOK_DELIVERIES_PER_MINUTE} deliveries a minute: 429 with Retry-After past it, and counts the outcomes`, async () => {
    const { hookId } = await densityVenue();
    // Not at the very end of a window: the pre-filled count must still be this window's.
    if (Date.now() % 60_000 > 55_000) await sleep(60_000 - (Date.now() % 60_000) + 100);
    const window = Math.floor(Date.now() / 60_000);
    // The deliveries this minute so far, as the limiter counts them (its Redis key).
    await stack.api.services.redis.incrby(`rl:ingest:hook:${hookId}:${window}`, WEBHOOK_DELIVERIES_PER_MINUTE);
    const res = await deliver(stack.api, hookId, JSON.stringify({ direction: 1, count: 1 }), auth);
    expect(res.status).toBe(429);
    expect(res.body).toMatchObject({ code: 'RATE_LIMITED', details: { limit: WEBHOOK_DELIVERIES_PER_MINUTE } });
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    const metrics = await stack.api.deps.metrics.registry.getSingleMetricAsString('webhook_deliveries_total');
    for (const outcome of ['accepted', 'refused', 'invalid', 'rate_limited'])
      expect(metrics).toContain(`connector="density",outcome="${outcome}"`);
  });
});
