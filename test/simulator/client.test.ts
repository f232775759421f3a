import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../lib/logger.js';
import { ApiClient, ApiError, StoppedError } from '../../simulator/client.js';

/**
 * The client's retry rules against answers the real API gives only when an engine is down (a 503
 * from Kafka's timeout, a dropped connection): a plain HTTP server plays them in order.
 */

const log = createLogger('simulator-client-test', 'silent');
type Step = (req: IncomingMessage, res: ServerResponse) => void;
let server: Server | undefined;
afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

async function serve(steps: Step[]): Promise<{ url: string; seen: Array<{ key: string | undefined; body: string }> }> {
  const seen: Array<{ key: string | undefined; body: string }> = [];
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ key: req.headers['idempotency-key'] as string | undefined, body });
      (steps[Math.min(seen.length - 1, steps.length - 1)] as Step)(req, res);
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Step =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
const drop: Step = (req) => req.socket.destroy();
const events = [{ type: 'heartbeat', timestamp: '2026-01-01T00:00:00Z', payload: {} }];

describe('simulator HTTP client', () => {
  it('resends the same batch with the same Idempotency-Key after a dropped connection and a 503', async () => {
    const { url, seen } = await serve([
      drop,
      json(503, { error: 'down', code: 'SERVICE_UNAVAILABLE' }, { 'retry-after': '1' }),
      json(202, { accepted: 1, rejected: 0, errors: [] }),
    ]);
    const client = new ApiClient({ url, log, key: 'vt_live_x' });
    const began = Date.now();
    const answer = await client.ingest('3f1c2a4e-0000-4000-8000-000000000000', 'meraki', events);
    expect(answer).toMatchObject({ accepted: 1, rejected: 0 });
    expect(seen).toHaveLength(3);
    expect(new Set(seen.map((s) => s.key)).size).toBe(1);
    expect(seen[0]!.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(seen.map((s) => s.body)).size).toBe(1);
    expect(Date.now() - began).toBeGreaterThanOrEqual(1000);
    expect(client.stats.retried).toBe(2);
  });

  it('does not resend what cannot succeed: a 400 or a 401 throws with the API’s message', async () => {
    const { url, seen } = await serve([json(400, { error: 'events: too many', code: 'VALIDATION_ERROR' })]);
    const client = new ApiClient({ url, log, key: 'vt_live_x' });
    await expect(client.ingest('3f1c2a4e-0000-4000-8000-000000000000', 'meraki', events)).rejects.toThrow(ApiError);
    await expect(client.ingest('3f1c2a4e-0000-4000-8000-000000000000', 'meraki', events)).rejects.toThrow(/400 events: too many/);
    expect(seen).toHaveLength(2);
  });

  it('stops a monthly-quota 429 instead of waiting for days', async () => {
    const { url } = await serve([json(429, { error: 'quota used up', code: 'QUOTA_EXCEEDED' }, { 'retry-after': '1296000' })]);
    const client = new ApiClient({ url, log, key: 'vt_live_x' });
    await expect(client.ingest('3f1c2a4e-0000-4000-8000-000000000000', 'square', events)).rejects.toThrow(/quota used up/);
  });

  it('drops at once, when the run is stopping, a batch that is only waiting for the rate limit', async () => {
    const { url, seen } = await serve([json(429, { error: 'slow down', code: 'RATE_LIMITED' }, { 'retry-after': '30' })]);
    let stopping = false;
    const client = new ApiClient({ url, log, key: 'vt_live_x', stopping: () => stopping, stopGraceMs: 20_000 });
    setTimeout(() => (stopping = true), 300);
    const began = Date.now();
    await expect(client.ingest('3f1c2a4e-0000-4000-8000-000000000000', 'unifi', events)).rejects.toThrow(StoppedError);
    expect(Date.now() - began).toBeLessThan(2000);
    expect(seen).toHaveLength(1);
    expect(client.stats.rateLimited).toBe(1);
  });

  it('gives up a batch that keeps failing once the run is stopping, after the grace period', async () => {
    const { url } = await serve([json(503, { error: 'down', code: 'SERVICE_UNAVAILABLE' }, { 'retry-after': '30' })]);
    let stopping = false;
    const client = new ApiClient({ url, log, key: 'vt_live_x', stopping: () => stopping, stopGraceMs: 500 });
    setTimeout(() => (stopping = true), 300);
    const began = Date.now();
    await expect(client.ingest('3f1c2a4e-0000-4000-8000-000000000000', 'aruba', events)).rejects.toThrow(StoppedError);
    expect(Date.now() - began).toBeLessThan(5000);
  });
});
