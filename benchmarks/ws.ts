/**
 * `npm run bench:ws`: the live stream end to end. A real api and edge (built, from dist/) on the
 * local stack; events go in through POST /ingest and come out as pushes on /ws connections. It
 * measures (a) the latency from the ingest request to the push arriving, at a steady event rate to
 * a set of subscribers, and (b) fan-out of single events to many open connections, with the
 * edge's memory per connection.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import pg from 'pg';
import WebSocket from 'ws';
import { createDb } from '../postgres/client.js';
import { migratePostgres } from '../postgres/migrate.js';
import { repoPath } from '../lib/paths.js';
import { benchConfig, machine, percentile, round, startProcess, waitFor, writeResult } from './lib/harness.js';

const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '1000' },
    duration: { type: 'string', default: '20' },
    subscribers: { type: 'string', default: '100' },
    batch: { type: 'string', default: '20' },
    'fanout-connections': { type: 'string', default: '10000' },
    'fanout-events': { type: 'string', default: '40' },
    'fanout-interval-ms': { type: 'string', default: '500' },
  },
});
const RATE = Number(args.rate);
const DURATION_S = Number(args.duration);
const SUBSCRIBERS = Number(args.subscribers);
const BATCH = Number(args.batch);
const FANOUT_CONNECTIONS = Number(args['fanout-connections']);
const FANOUT_EVENTS = Number(args['fanout-events']);
const FANOUT_INTERVAL_MS = Number(args['fanout-interval-ms']);

const { up } = (await import(repoPath('scripts', 'stack.mjs'))) as { up: (o: { quiet: boolean }) => Promise<unknown> };
await up({ quiet: true });

const runId = Date.now().toString(36);
const API_PORT = 3193;
const EDGE_PORT = 3194;
const { cfg: baseCfg } = benchConfig({});
const dbUrl = new URL(baseCfg.DATABASE_URL);
dbUrl.pathname = '/venue_bench_ws';
const { cfg, env } = benchConfig({
  NODE_ENV: 'production',
  LOG_LEVEL: 'warn',
  DATABASE_URL: dbUrl.toString(),
  CLICKHOUSE_DATABASE: 'venue_bench_ws',
  KAFKA_TOPIC_PREFIX: `bench.${runId}`,
  REDIS_KEY_PREFIX: `bench.${runId}:`,
  API_PORT: String(API_PORT),
  EDGE_PORT: String(EDGE_PORT),
  RATE_LIMITS_ENABLED: 'false',
  // One venue watched by every connection of the run: one operator holds them all.
  WS_MAX_CONNECTIONS_PER_OPERATOR: String(Math.max(SUBSCRIBERS, FANOUT_CONNECTIONS) + 10),
});

console.log(
  `bench:ws  (a) ${RATE} events/s for ${DURATION_S}s to ${SUBSCRIBERS} subscribers, ${BATCH}-event requests; ` +
    `(b) ${FANOUT_EVENTS} events to ${FANOUT_CONNECTIONS} connections, one every ${FANOUT_INTERVAL_MS} ms`,
);

const admin = new pg.Client({ connectionString: baseCfg.DATABASE_URL });
await admin.connect();
await admin.query('DROP DATABASE IF EXISTS venue_bench_ws WITH (FORCE)');
await admin.query('CREATE DATABASE venue_bench_ws');
await admin.end();
const db = createDb(cfg, 2);
await migratePostgres(db);
await db.end();

const procStat = (pid: number | undefined) => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return { rssBytes: Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024, cpuS: (Number(stat[11]) + Number(stat[12])) / 100 };
  } catch {
    return { rssBytes: NaN, cpuS: NaN };
  }
};

const api = startProcess('api', 'dist/apps/api/main.js', env);
const edge = startProcess('edge', 'dist/apps/edge/main.js', env);
const base = `http://127.0.0.1:${API_PORT}`;
const wsUrl = `ws://127.0.0.1:${EDGE_PORT}/ws`;
await waitFor('api', async () => (await fetch(`${base}/api/status`)).ok);
await waitFor('edge', async () => (await fetch(`http://127.0.0.1:${EDGE_PORT}/health`)).ok);

async function call(path: string, init: RequestInit & { key?: string } = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(init.headers as Record<string, string>) };
  if (init.key) headers.authorization = `Bearer ${init.key}`;
  const res = await fetch(base + path, { ...init, headers });
  const body = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

const op = await call('/api/operators', {
  method: 'POST',
  headers: { 'x-admin-key': cfg.ADMIN_SECRET },
  body: JSON.stringify({ name: 'bench ws', email: 'bench-ws@example.com', plan: 'pro' }),
});
const key = op.api_key as string;
const venueA = (await call('/api/venues', { method: 'POST', key, body: JSON.stringify({ name: 'Steady', timezone: 'UTC' }) })).id as string;
const venueB = (await call('/api/venues', { method: 'POST', key, body: JSON.stringify({ name: 'Fan-out', timezone: 'UTC' }) })).id as string;

/** Sent-at time (performance.now) of each event, by its sequence number (its `occupancy` metric). */
const sentAt = new Map<number, number>();
let seq = 0;

/** One ingest request of `n` density occupancy events numbered from `seq`. */
async function ingest(venueId: string, n: number): Promise<number> {
  const first = seq;
  seq += n;
  const timestamp = new Date().toISOString();
  const events = Array.from({ length: n }, (_, i) => ({ type: 'occupancy', timestamp, payload: { space_id: 'spc_1', occupancy: first + i } }));
  const t0 = performance.now();
  for (let i = 0; i < n; i++) sentAt.set(first + i, t0);
  const res = await fetch(`${base}/ingest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ venue_id: venueId, connector_type: 'density', events }),
  });
  await res.arrayBuffer();
  if (res.status !== 202) throw new Error(`ingest answered ${res.status}`);
  return performance.now() - t0;
}

interface Sub {
  ws: WebSocket;
  received: number;
}

/** Opens `n` connections (at most 200 handshakes at a time) subscribed to the venue; each push's latency goes to `sink`. */
async function openSubscribers(n: number, venueId: string, sink: number[], lastOf?: Map<number, number>): Promise<{ subs: Sub[]; failed: number }> {
  const subs: Sub[] = [];
  let failed = 0;
  const openOne = () =>
    new Promise<void>((resolve) => {
      const ws = new WebSocket(`${wsUrl}?token=${key}`, { perMessageDeflate: false });
      const sub: Sub = { ws, received: 0 };
      let done = false;
      const finish = (ok: boolean) => {
        if (done) return;
        done = true;
        if (ok) subs.push(sub);
        else failed++;
        resolve();
      };
      ws.on('message', (data: Buffer) => {
        const m = JSON.parse(data.toString('utf8')) as { type?: string; data?: { metrics: { occupancy: number } } };
        if (m.data) {
          const now = performance.now();
          const n = m.data.metrics.occupancy;
          const t0 = sentAt.get(n);
          if (t0 !== undefined) sink.push(now - t0);
          if (lastOf) lastOf.set(n, Math.max(lastOf.get(n) ?? 0, now));
          sub.received++;
        } else if (m.type === 'connected') ws.send(JSON.stringify({ tsSubCmds: [{ cmdId: 1, entityId: venueId, keys: ['occupancy'] }] }));
        else if (m.type === 'subscribed') finish(true);
        else finish(false);
      });
      ws.on('error', () => finish(false));
      ws.on('close', () => finish(false));
    });
  for (let i = 0; i < n; i += 200) await Promise.all(Array.from({ length: Math.min(200, n - i) }, openOne));
  return { subs, failed };
}

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { samples: s.length, p50: round(percentile(s, 50)), p95: round(percentile(s, 95)), p99: round(percentile(s, 99)), max: round(s[s.length - 1] ?? NaN) };
};

// ---- (a) steady rate to subscribers ----
const steadyLatency: number[] = [];
const steady = await openSubscribers(SUBSCRIBERS, venueA, steadyLatency);
const requestMs: number[] = [];
const cpu0 = { edge: procStat(edge.child.pid).cpuS, api: procStat(api.child.pid).cpuS };
const steadyFirst = seq;
const started = performance.now();
const requests = Math.max(1, Math.round((RATE * DURATION_S) / BATCH));
const inFlight: Array<Promise<void>> = [];
for (let i = 0; i < requests; i++) {
  const wait = started + ((i * BATCH) / RATE) * 1000 - performance.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  inFlight.push(ingest(venueA, BATCH).then((ms) => void requestMs.push(ms)));
}
await Promise.all(inFlight);
const steadyEvents = seq - steadyFirst;
const expectedSteady = steadyEvents * steady.subs.length;
const drainUntil = performance.now() + 10_000;
while (steadyLatency.length < expectedSteady && performance.now() < drainUntil) await new Promise((r) => setTimeout(r, 50));
const steadyCpu = { edge: round(procStat(edge.child.pid).cpuS - cpu0.edge), api: round(procStat(api.child.pid).cpuS - cpu0.api) };
const steadyResult = {
  offeredEventsPerS: RATE,
  seconds: round((performance.now() - started) / 1000),
  subscribers: steady.subs.length,
  failedToSubscribe: steady.failed,
  events: steadyEvents,
  pushesExpected: expectedSteady,
  pushesReceived: steadyLatency.length,
  ingestToPushMs: stats(steadyLatency),
  ingestRequestMs: stats(requestMs),
  cpuSeconds: steadyCpu,
};
console.log(`(a) ${steadyResult.pushesReceived}/${expectedSteady} pushes; ingest → push p50 ${steadyResult.ingestToPushMs.p50} / p95 ${steadyResult.ingestToPushMs.p95} / p99 ${steadyResult.ingestToPushMs.p99} ms`);
for (const s of steady.subs) s.ws.terminate();
await new Promise((r) => setTimeout(r, 1000));

// ---- (b) fan-out to many connections, and memory per connection ----
const edgeHealth = async () =>
  (await (await fetch(`http://127.0.0.1:${EDGE_PORT}/health`)).json()) as { websocket: { connections: number }; memory: { heapUsedBytes: number } };
const rssBefore = procStat(edge.child.pid).rssBytes;
const heapBefore = (await edgeHealth()).memory.heapUsedBytes;
const fanLatency: number[] = [];
const lastArrival = new Map<number, number>();
const openStarted = performance.now();
const fan = await openSubscribers(FANOUT_CONNECTIONS, venueB, fanLatency, lastArrival);
const openSeconds = (performance.now() - openStarted) / 1000;
await new Promise((r) => setTimeout(r, 2000));
const rssAfter = procStat(edge.child.pid).rssBytes;
const health = await edgeHealth();
const fanFirst = seq;
const fanSent: number[] = [];
for (let i = 0; i < FANOUT_EVENTS; i++) {
  fanSent.push(seq);
  await ingest(venueB, 1);
  await new Promise((r) => setTimeout(r, FANOUT_INTERVAL_MS));
}
const expectedFan = (seq - fanFirst) * fan.subs.length;
const fanDrainUntil = performance.now() + 15_000;
while (fanLatency.length < expectedFan && performance.now() < fanDrainUntil) await new Promise((r) => setTimeout(r, 50));
const allDelivered = fanSent.filter((n) => lastArrival.has(n)).map((n) => lastArrival.get(n)! - sentAt.get(n)!);
const fanResult = {
  connectionsAttempted: FANOUT_CONNECTIONS,
  connectionsHeld: fan.subs.length,
  edgeReportedConnections: health.websocket.connections,
  failedToConnect: fan.failed,
  secondsToOpenAndSubscribe: round(openSeconds),
  edgeRssBeforeMiB: round(rssBefore / 2 ** 20),
  edgeRssAfterMiB: round(rssAfter / 2 ** 20),
  edgeBytesPerConnection: fan.subs.length ? Math.round((rssAfter - rssBefore) / fan.subs.length) : null,
  /** The JS heap's share (V8 may not have collected the handshakes' garbage yet: an upper bound). */
  edgeHeapBytesPerConnection: fan.subs.length ? Math.round((health.memory.heapUsedBytes - heapBefore) / fan.subs.length) : null,
  events: seq - fanFirst,
  pushesExpected: expectedFan,
  pushesReceived: fanLatency.length,
  ingestToPushMs: stats(fanLatency),
  ingestToLastConnectionMs: stats(allDelivered),
};
console.log(
  `(b) ${fan.subs.length}/${FANOUT_CONNECTIONS} connections held, ${fanResult.edgeBytesPerConnection} B each; ` +
    `${fanResult.pushesReceived}/${expectedFan} pushes; ingest → push p50 ${fanResult.ingestToPushMs.p50} / p99 ${fanResult.ingestToPushMs.p99} ms; ` +
    `to the last connection p99 ${fanResult.ingestToLastConnectionMs.p99} ms`,
);
for (const s of fan.subs) s.ws.terminate();

await Promise.all([edge.stop(), api.stop()]);
const path = writeResult('ws', {
  at: new Date().toISOString(),
  machine: machine(),
  options: { rate: RATE, duration: DURATION_S, subscribers: SUBSCRIBERS, batch: BATCH, fanoutConnections: FANOUT_CONNECTIONS, fanoutEvents: FANOUT_EVENTS, fanoutIntervalMs: FANOUT_INTERVAL_MS },
  steady: steadyResult,
  fanout: fanResult,
  goals: {
    connections10k: { goal: '10,000 connections at ≤ 10 KB each', held: fan.subs.length, bytesPerConnection: fanResult.edgeBytesPerConnection, met: fan.subs.length >= 10_000 && (fanResult.edgeBytesPerConnection ?? Infinity) <= 10_240 },
    steadyP99: { goal: 'ingest → push p99 ≤ 100 ms at 1,000 events/s to 100 subscribers', p99: steadyResult.ingestToPushMs.p99, met: RATE >= 1000 && steady.subs.length >= 100 && steadyResult.ingestToPushMs.p99 <= 100 },
  },
});
console.log(`wrote ${path}`);
process.exit(0);
