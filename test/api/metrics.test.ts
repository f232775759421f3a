import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveMetrics, type MetricsServer } from '../../lib/metrics.js';
import { startApi, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue } from '../support/tenants.js';
import { isoAgo } from '../ingest/support.js';

let api: RunningApi;
let metrics: MetricsServer;
beforeAll(async () => {
  api = await startApi();
  metrics = await serveMetrics(api.deps.metrics.registry, '127.0.0.1', 0, api.services.log);
});
afterAll(async () => {
  await metrics.close();
  await api.close();
});

async function scrape(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${metrics.port}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/plain');
  return res.text();
}

/** The value of one series (0 when absent), matched by name and every given label. */
function value(text: string, name: string, labels: Record<string, string> = {}): number {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

describe('the api’s Prometheus metrics', () => {
  it('move with requests by declared route and status, ingest outcomes by reason, and Kafka produce latency', async () => {
    const op = await newOperator(api, 'pro');
    const venue = await newVenue(api, op.key);
    const before = await scrape();
    for (let i = 0; i < 3; i++) expect((await request(`${api.url}/api/venues/${venue.id}`, { key: op.key })).status).toBe(200);
    expect((await request(`${api.url}/api/venues/${venue.id}`)).status).toBe(401);
    expect((await request(`${api.url}/nope`)).status).toBe(404);
    const ingest = await request(`${api.url}/ingest`, {
      key: op.key,
      json: {
        venue_id: venue.id,
        connector_type: 'meraki',
        events: [
          { type: 'device_seen', timestamp: isoAgo(), payload: { clientMac: '00:11:22:33:44:55' } },
          { type: 'device_seen', timestamp: isoAgo(), payload: { clientMac: '00:11:22:33:44:56' } },
          { type: 'visit', timestamp: isoAgo(), payload: {} },
          { type: 'device_seen', timestamp: 'yesterday', payload: { clientMac: '00:11:22:33:44:57' } },
        ],
      },
    });
    expect(ingest.body).toMatchObject({ accepted: 2, rejected: 2 });
    const after = await scrape();
    const route = { route: '/api/venues/:id', method: 'GET' };
    expect(
      value(after, 'http_requests_total', { ...route, status: '200' }) - value(before, 'http_requests_total', { ...route, status: '200' }),
    ).toBe(3);
    expect(
      value(after, 'http_requests_total', { ...route, status: '401' }) - value(before, 'http_requests_total', { ...route, status: '401' }),
    ).toBe(1);
    expect(value(after, 'http_requests_total', { route: 'unmatched', status: '404' })).toBeGreaterThan(
      value(before, 'http_requests_total', { route: 'unmatched', status: '404' }),
    );
    expect(value(after, 'http_request_duration_seconds_count', route) - value(before, 'http_request_duration_seconds_count', route)).toBe(
      4,
    );
    expect(
      value(after, 'ingest_events_total', { outcome: 'accepted' }) - value(before, 'ingest_events_total', { outcome: 'accepted' }),
    ).toBe(2);
    expect(
      value(after, 'ingest_events_total', { outcome: 'rejected', reason: 'type' }) -
        value(before, 'ingest_events_total', { outcome: 'rejected', reason: 'type' }),
    ).toBe(1);
    expect(
      value(after, 'ingest_events_total', { outcome: 'rejected', reason: 'timestamp' }) -
        value(before, 'ingest_events_total', { outcome: 'rejected', reason: 'timestamp' }),
    ).toBe(1);
    expect(
      value(after, 'kafka_produce_duration_seconds_count', { outcome: 'acknowledged' }) -
        value(before, 'kafka_produce_duration_seconds_count', { outcome: 'acknowledged' }),
    ).toBe(1);
    // Process metrics, labelled with the service.
    expect(after).toMatch(/^process_resident_memory_bytes\{service="api"\} \d+/m);
    expect(after).toMatch(/^nodejs_eventloop_lag_seconds\{service="api"\}/m);
  });

  it('are served only at GET /metrics on their own port', async () => {
    const other = await fetch(`http://127.0.0.1:${metrics.port}/`);
    expect(other.status).toBe(404);
    expect((await request(`${api.url}/metrics`)).status).toBe(404);
  });
});
