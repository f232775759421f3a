import { createServer, type AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { expect } from 'vitest';
import type { Config } from '../../lib/config.js';
import { createLogger } from '../../lib/logger.js';
import { startEdge, type EdgeOptions, type RunningEdge } from '../../apps/edge/server.js';
import { testConfig, type RunningApi } from '../support/env.js';
import { request, type JsonResponse } from '../support/http.js';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface TestEdge extends RunningEdge {
  url: string;
  cfg: Config;
}

/** A real edge instance in this process (own uWS app, consumer groups, Postgres pool, Redis client). */
export async function startTestEdge(overrides: Partial<Record<keyof Config, string>> = {}, opts: EdgeOptions = {}): Promise<TestEdge> {
  const cfg = testConfig({ EDGE_HOST: '127.0.0.1', EDGE_PORT: String(await freePort()), ...overrides });
  const edge = await startEdge(cfg, createLogger('edge-test', cfg.LOG_LEVEL), opts);
  return Object.assign(edge, { url: `ws://127.0.0.1:${edge.port}/ws`, cfg });
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Msg = any;

/** A WebSocket client that keeps every message and the close code and reason. */
export class Client {
  readonly messages: Msg[] = [];
  readonly pings: number[] = [];
  closed: { code: number; reason: string } | null = null;
  /** The client-side error that ended the connection, if one did (a 1006 close says no more). */
  error: string | null = null;
  private readonly closedP: Promise<{ code: number; reason: string }>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const text = data.toString('utf8');
      try {
        this.messages.push(JSON.parse(text));
      } catch {
        this.messages.push({ unparsable: text });
      }
    });
    ws.on('ping', () => this.pings.push(Date.now()));
    ws.on('error', (err) => {
      this.error = err.message;
    });
    this.closedP = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        this.closed = { code, reason: reason.toString('utf8') };
        resolve(this.closed);
      }),
    );
  }

  static async open(url: string, token?: string): Promise<Client> {
    const ws = new WebSocket(token === undefined ? url : `${url}?token=${encodeURIComponent(token)}`);
    const client = new Client(ws);
    await new Promise<void>((resolve, reject) => {
      ws.on('open', () => resolve());
      ws.on('close', () => resolve());
      ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade refused with HTTP ${res.statusCode}`)));
      ws.on('error', reject);
    });
    return client;
  }

  /** Opens a connection and waits for the `connected` message. */
  static async connected(url: string, token: string): Promise<Client> {
    const client = await Client.open(url, token);
    const hello = await client.next((m) => m.type === 'connected' || m.type === 'error');
    expect(hello, JSON.stringify(hello)).toMatchObject({ type: 'connected' });
    return client;
  }

  send(message: unknown): void {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** The first message (from `from` on) matching the predicate. */
  // Generous: a cold stack (first run on a new machine) can take seconds to answer the first commands.
  async next(match: (m: Msg) => boolean, timeoutMs = 20_000, from = 0): Promise<Msg> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages.slice(from).find(match);
      if (found !== undefined) return found;
      if (Date.now() > deadline)
        throw new Error(
          `no matching message within ${timeoutMs} ms; closed: ${JSON.stringify(this.closed)}; got ${JSON.stringify(this.messages).slice(0, 2000)}`,
        );
      await sleep(20);
    }
  }

  /** Sends a command and waits for the reply carrying cmdId (an ack or an error). */
  async command(message: unknown, cmdId: number | null): Promise<Msg> {
    const from = this.messages.length;
    this.send(message);
    return this.next((m) => m.cmdId === cmdId && (m.type !== undefined || m.errorCode !== undefined), 20_000, from);
  }

  async subscribe(cmdId: number, venueId: string, keys: string[]): Promise<void> {
    const reply = await this.command({ tsSubCmds: [{ cmdId, entityId: venueId, keys }] }, cmdId);
    expect(reply, JSON.stringify(reply)).toEqual({ cmdId, type: 'subscribed', entityId: venueId, keys });
  }

  pushes(cmdId?: number): Msg[] {
    return this.messages.filter((m) => m.data !== undefined && (cmdId === undefined || m.cmdId === cmdId));
  }

  async waitClose(timeoutMs = 15_000): Promise<{ code: number; reason: string }> {
    return Promise.race([this.closedP, sleep(timeoutMs).then(() => Promise.reject(new Error(`not closed within ${timeoutMs} ms`)))]);
  }

  close(): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.terminate();
  }
}

/** Density door events through the real API (POST /ingest): `entry` carries entries + occupancy. */
export async function ingestDensity(
  api: RunningApi,
  key: string,
  venueId: string,
  events: Array<{ type: 'entry' | 'exit' | 'occupancy' | 'heartbeat'; count?: number; timestamp?: string }>,
): Promise<JsonResponse> {
  const res = await request(`${api.url}/ingest`, {
    key,
    json: {
      venue_id: venueId,
      connector_type: 'density',
      events: events.map((e) => ({
        type: e.type,
        timestamp: e.timestamp ?? new Date(Date.now() - 1000).toISOString(),
        payload:
          e.type === 'occupancy'
            ? { space_id: 'spc_1', occupancy: e.count ?? 0 }
            : e.type === 'heartbeat'
              ? { status: 'ok' }
              : { space_id: 'spc_1', doorway_id: 'drw_1', ...(e.count === undefined ? {} : { count: e.count }) },
      })),
    },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(res.body.rejected, JSON.stringify(res.body)).toBe(0);
  return res;
}

/** Verkada environment readings: temperature, humidity, co2 (no occupancy, no entries). */
export async function ingestEnvironment(api: RunningApi, key: string, venueId: string, reading: Record<string, number>): Promise<void> {
  const res = await request(`${api.url}/ingest`, {
    key,
    json: {
      venue_id: venueId,
      connector_type: 'verkada',
      events: [{ type: 'environment', timestamp: new Date(Date.now() - 1000).toISOString(), payload: { device_id: 'sv11', ...reading } }],
    },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(res.body.accepted, JSON.stringify(res.body)).toBe(1);
}
