import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../support/http.js';
import { startServiceStack, type ServiceStack } from '../support/service-stack.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { deliver, newIntegration } from './support.js';

/**
 * A broken vendor link shows where an operations manager looks, end to end: receiver → ingest
 * report → health processor → /api/dashboard/connectors and the alarm rules.
 */
let stack: ServiceStack;
let op: TestOperator;
let venueId: string;
let hookId: string;
const SECRET = 'meraki-health-secret';

beforeAll(async () => {
  stack = await startServiceStack('hookhealth');
  op = await newOperator(stack.api, 'pro');
  venueId = (await newVenue(stack.api, op.key)).id;
  hookId = await newIntegration(stack.api, op.key, venueId, 'meraki', { api_key: 'k', org_id: '1', webhook_secret: SECRET });
});

afterAll(async () => {
  await stack?.close();
});

const post = (secret: string) =>
  deliver(
    stack.api,
    hookId,
    JSON.stringify({
      version: '2.0',
      secret,
      type: 'DevicesSeen',
      data: {
        apMac: '00:18:0a:13:dd:b0',
        apFloors: [],
        apTags: [],
        observations: [{ clientMac: '60:f8:1d:ca:0d:4c', seenTime: new Date().toISOString(), rssi: 40, ssid: null }],
      },
    }),
  );
const get = async (path: string) => (await request(`${stack.api.url}${path}`, { key: op.key })).body;
async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
const meraki = async (status: string) => {
  const { connectors } = await get('/api/dashboard/connectors');
  return connectors.find((c: { type: string; status: string }) => c.type === 'meraki' && c.status === status);
};

describe('health from a webhook receiver', () => {
  it('a wrong secret degrades the integration with the reason and raises an alarm saying so; the next good delivery clears both', async () => {
    expect((await post(SECRET)).status).toBe(200);
    await until('meraki healthy', () => meraki('healthy'));

    for (let i = 0; i < 3; i++) expect((await post('an-old-secret')).status).toBe(401);
    await until('meraki degraded', () => meraki('degraded'));
    const alarm = await until('the connector alarm', async () => {
      const { alarms } = await get(`/api/alarms?status=ACTIVE_UNACK&venue_id=${venueId}`);
      return alarms.find((a: { type: string }) => a.type === 'connector_unhealthy');
    });
    expect(alarm).toMatchObject({ severity: 'MINOR', integrationId: hookId });
    expect(alarm.message).toMatch(/^meraki connector degraded: webhook deliveries refused \(3 in a row\): .*secret/);
    expect(alarm.message).not.toContain('an-old-secret');

    expect((await post(SECRET)).status).toBe(200);
    await until('meraki healthy again', () => meraki('healthy'));
    await until('the alarm cleared', async () => {
      const { alarms } = await get(`/api/alarms?venue_id=${venueId}`);
      const cleared = alarms.find((a: { id: string; status: string }) => a.id === alarm.id && a.status === 'CLEARED_UNACK');
      return cleared ?? undefined;
    });
  });
});
