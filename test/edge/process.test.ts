import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { newOperator, newVenue } from '../support/tenants.js';
import { request } from '../support/http.js';
import { Client, freePort, ingestDensity, sleep, startTestEdge, type TestEdge } from './support.js';

/** The real edge entry point (apps/edge/main.ts) as a child process with the run's environment. */
interface EdgeProcess {
  child: ChildProcess;
  url: string;
  health: string;
  exited: Promise<number | null>;
}

let api: RunningApi;
const children: EdgeProcess[] = [];
const clients: Client[] = [];
const edges: TestEdge[] = [];

async function spawnEdge(env: Record<string, string> = {}): Promise<EdgeProcess> {
  const port = await freePort();
  // The edge's log is kept: a failure here is read from what the edge said, not guessed.
  mkdirSync('.stack/logs', { recursive: true });
  const logFile = openSync(`.stack/logs/edge-process-${port}.log`, 'w');
  const child = spawn(process.execPath, ['node_modules/vite-node/vite-node.mjs', 'apps/edge/main.ts'], {
    env: { ...process.env, LOG_LEVEL: 'warn', EDGE_HOST: '127.0.0.1', EDGE_PORT: String(port), ...env },
    stdio: ['ignore', logFile, logFile],
  });
  closeSync(logFile);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const edge = { child, url: `ws://127.0.0.1:${port}/ws`, health: `http://127.0.0.1:${port}/health`, exited };
  children.push(edge);
  const until = Date.now() + 60_000;
  while (
    !(await fetch(edge.health).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (Date.now() > until || child.exitCode !== null) throw new Error('the edge did not start');
    await sleep(200);
  }
  return edge;
}

const track = (c: Client) => (clients.push(c), c);

beforeAll(async () => {
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
});

afterEach(async () => {
  while (clients.length) clients.pop()!.close();
  while (edges.length) await edges.pop()!.close();
  for (const e of children.splice(0)) if (e.child.exitCode === null) e.child.kill('SIGKILL');
});

afterAll(async () => {
  await api?.close();
});

describe('the edge process', () => {
  it('on SIGTERM closes every socket with 1001, gives the leases back and exits 0', async () => {
    const edge = await spawnEdge();
    const a = await newOperator(api, 'pro');
    const b = await newOperator(api);
    const venue = (await newVenue(api, a.key)).id;
    const conns = [
      ...(await Promise.all([0, 1, 2].map(() => Client.connected(edge.url, a.key)))),
      await Client.connected(edge.url, b.key),
    ].map(track);
    await conns[0]!.subscribe(1, venue, ['entries']);
    await ingestDensity(api, a.key, venue, [{ type: 'entry' }]);
    await conns[0]!.next((m) => m.data);
    expect((await request(edge.health)).body.websocket).toMatchObject({ connections: 4, operators: 2, subscriptions: 1 });

    const signalled = Date.now();
    edge.child.kill('SIGTERM');
    for (const c of conns) {
      const closed = await c.waitClose(10_000);
      expect(closed.code).toBe(1001);
      expect(closed.reason).toMatch(/^SERVICE_UNAVAILABLE: server shutting down; reconnect now/);
    }
    expect(await Promise.race([edge.exited, sleep(10_000).then(() => 'still running')])).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(10_000);

    // The leases went with the sockets: the operator's ten places are free at once elsewhere.
    const next = await startTestEdge();
    edges.push(next);
    for (let i = 0; i < 10; i++) track(await Client.connected(next.url, a.key));
  });

  it("never locks an operator out after a crash: the dead edge's leases lapse after WS_LEASE_TTL_MS", async () => {
    // Leases are refreshed every TTL/3, so the first can lapse 2/3 of a TTL after the kill: the
    // second edge is up before the kill, so the first reconnect is not late on a slow machine.
    const ttl = 9000;
    const edge = await spawnEdge({ WS_LEASE_TTL_MS: String(ttl) });
    const next = await startTestEdge({ WS_LEASE_TTL_MS: String(ttl) });
    edges.push(next);
    const op = await newOperator(api);
    const conns = [];
    for (let i = 0; i < 10; i++) conns.push(track(await Client.connected(edge.url, op.key)));
    // The leases are in Redis, where the other edge counts them.
    const closedEarly = conns.flatMap((c, i) => (c.closed ? [{ i, ...c.closed, error: c.error }] : []));
    expect({ ...(await request(edge.health)).body.websocket, closedEarly }).toMatchObject({
      connections: 10,
      leases: 10,
      redis: 'shared',
      closedEarly: [],
    });
    edge.child.kill('SIGKILL');
    await edge.exited;
    const killedAt = Date.now();
    for (const c of conns) expect((await c.waitClose()).code).toBe(1006);

    let admitted: Client | undefined;
    let refusals = 0;
    let firstTry: number | undefined;
    while (!admitted && Date.now() - killedAt < ttl + 5000) {
      firstTry ??= Date.now() - killedAt;
      const c = track(await Client.open(next.url, op.key));
      const first = await c.next(() => true);
      if (first.type === 'connected') admitted = c;
      else {
        expect(first.errorCode).toBe('RATE_LIMITED');
        refusals++;
        await sleep(250);
      }
    }
    // Until then the dead edge's connections still counted (their leases were real).
    const seen = refusals === 0 ? JSON.stringify((await request(`http://127.0.0.1:${next.port}/health`)).body.websocket) : '';
    expect(
      refusals,
      `first try ${firstTry} ms after the kill, admitted after ${Date.now() - killedAt} ms; the other edge: ${seen}`,
    ).toBeGreaterThan(0);
    expect(admitted, 'a connection admitted once the leases lapsed').toBeDefined();
    expect(Date.now() - killedAt).toBeLessThan(ttl + 5000);
    // Each lease lapses a TTL after it was last taken or refreshed, all before the kill: the first
    // admission can come while later-taken ones still count, but by killedAt + TTL none does.
    await sleep(Math.max(0, killedAt + ttl + 250 - Date.now()));
    for (let i = 1; i < 10; i++) track(await Client.connected(next.url, op.key));
  });
});
