import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEdgeRegistry } from '../../apps/edge/metrics.js';
import { serveMetrics, type MetricsServer } from '../../lib/metrics.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { newOperator, newVenue } from '../support/tenants.js';
import { Client, ingestEnvironment, startTestEdge, type TestEdge } from './support.js';

let api: RunningApi;
let edge: TestEdge;
let metrics: MetricsServer;
beforeAll(async () => {
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  edge = await startTestEdge();
  metrics = await serveMetrics(createEdgeRegistry(edge.stats), '127.0.0.1', 0, api.services.log);
});
afterAll(async () => {
  await metrics.close();
  await edge.close();
  await api.close();
});

async function scrape(): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^(ws_\w+)\{service="edge"\} (\S+)$/.exec(line);
    if (m) out[m[1]!] = Number(m[2]);
  }
  expect(text).toMatch(/^process_resident_memory_bytes\{service="edge"\}/m);
  return out;
}

describe('the edge’s Prometheus metrics', () => {
  it('count open connections, subscriptions, frames sent and received, and refusals', async () => {
    const op = await newOperator(api, 'pro');
    const venue = await newVenue(api, op.key);
    const before = await scrape();
    const client = await Client.connected(edge.url, op.key);
    await client.subscribe(1, venue.id, ['temperature']);
    await ingestEnvironment(api, op.key, venue.id, { temperature: 21.5 });
    await client.next((m) => m.cmdId === 1 && m.data !== undefined);
    const refused = await Client.open(edge.url, 'vt_live_' + 'x'.repeat(28));
    await refused.waitClose();
    const during = await scrape();
    expect(during.ws_connections! - before.ws_connections!).toBe(1);
    expect(during.ws_subscriptions! - before.ws_subscriptions!).toBe(1);
    // connected, the subscription's acknowledgement, the push; and one command received.
    expect(during.ws_messages_sent_total! - before.ws_messages_sent_total!).toBeGreaterThanOrEqual(3);
    expect(during.ws_messages_received_total! - before.ws_messages_received_total!).toBe(1);
    expect(during.ws_refused_total! - before.ws_refused_total!).toBe(1);
    client.close();
    await client.waitClose();
    for (let i = 0; i < 50 && (await scrape()).ws_connections !== before.ws_connections; i++) await new Promise((r) => setTimeout(r, 50));
    expect((await scrape()).ws_connections).toBe(before.ws_connections);
  });
});
