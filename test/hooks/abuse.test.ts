import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue } from '../support/tenants.js';
import { deliver, newIntegration } from './support.js';

/** Unauthenticated garbage: the per-address budget of refusals, the body limit, and never a 5xx. */
let api: RunningApi;
const hooks: Record<string, string> = {};
beforeAll(async () => {
  // Its own Redis namespace: the per-address count of refusals starts at 0 whatever other suites did.
  api = await startApi(
    testConfig({
      UNAUTHENTICATED_RATE_LIMIT: '5',
      REDIS_KEY_PREFIX: `${testConfig().REDIS_KEY_PREFIX}hooks-abuse-${randomUUID().slice(0, 6)}:`,
    }),
  );
  const op = await newOperator(api, 'pro');
  const venueId = (await newVenue(api, op.key)).id;
  hooks.meraki = await newIntegration(api, op.key, venueId, 'meraki', { api_key: 'k', org_id: '1', webhook_secret: 's', validator: 'v1' });
  hooks.verkada = await newIntegration(api, op.key, venueId, 'verkada', { org_id: 'o', api_key: 'k', webhook_secret: 's' });
  hooks.square = await newIntegration(api, op.key, venueId, 'square', {
    location_id: 'L',
    access_token: 't',
    webhook_signature_key: 'k',
    notification_url: 'https://h.example.com/x',
  });
  hooks.density = await newIntegration(api, op.key, venueId, 'density', {
    api_token: 't',
    webhook_header_name: 'X-T',
    webhook_header_value: 'v',
  });
});
afterAll(async () => {
  await api?.close();
});

describe('/hooks abuse', () => {
  it('answers junk with 4xx envelopes (or a taken delivery accepting nothing), never a 5xx, and a body over 2 MiB with 413', async () => {
    const junk = [
      '',
      'null',
      '[]',
      '{}',
      '"x"',
      '{"version":"3.0","secret":"s","type":"WiFi","data":{"observations":[1,null,{"clientMac":{}}]}}',
      '['.repeat(3000),
      '{"a":"\\ud800"}',
      '\u00ff',
    ];
    const headerSets: Array<Record<string, string>> = [
      {},
      { 'content-type': 'application/json' },
      { 'content-type': 'application/json; charset=latin1' },
      { 'content-encoding': 'gzip', 'content-type': 'application/json' },
      { 'verkada-signature': '1|00', 'x-square-hmacsha256-signature': '', 'x-t': 'v', 'content-type': 'application/json' },
    ];
    const failures: string[] = [];
    for (const id of [...Object.values(hooks), 'x'.repeat(300), '%00']) {
      for (const raw of junk) {
        for (const headers of headerSets) {
          const res = await request(`${api.url}/hooks/${id}`, { method: 'POST', rawBody: raw, headers });
          // A correctly signed Meraki post of bad observations is taken (200), each observation rejected by ingest.
          const taken = res.status === 200 && res.body?.accepted === 0;
          if (
            !taken &&
            (res.status >= 500 || res.status === 200 || typeof res.body?.error !== 'string' || typeof res.body?.code !== 'string')
          ) {
            failures.push(
              `${id.slice(0, 12)} ${JSON.stringify(headers)} ${raw.slice(0, 40)} → ${res.status} ${JSON.stringify(res.body)?.slice(0, 120)}`,
            );
          }
        }
      }
    }
    expect(failures).toEqual([]);
    const big = await deliver(api, hooks.density!, JSON.stringify({ direction: 1, pad: 'x'.repeat(2 * 1024 * 1024) }), { 'X-T': 'v' });
    expect(big.status).toBe(413);
    expect(big.body.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it("counts refused deliveries against the caller address's budget: 429 past it", async () => {
    // A fresh window's worth: the junk above already used this address's budget in this minute, so use a wrong Density header until it trips.
    let last = 0;
    for (let i = 0; i < 12 && last !== 429; i++) last = (await deliver(api, hooks.density!, '{"direction":1}', { 'X-T': 'wrong' })).status;
    expect(last).toBe(429);
    const res = await deliver(api, hooks.density!, '{"direction":1}', { 'X-T': 'wrong' });
    expect(res.status).toBe(429);
    expect(res.body.code).toBe('RATE_LIMITED');
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
  });
});
