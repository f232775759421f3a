/**
 * `npm run bench:ws`: the live stream end to end. A real api and edge (built, from dist/) on the
 * local stack; events go in through POST /ingest and come out as pushes on /ws connections. It
 * measures (a) the latency from the ingest request to the push arriving, at a steady event rate to
 * a set of subscribers, and (b) fan-out of single events to many open connections, with the
 * edge's memory per connection. The fan-out connections live in `--fanout-clients` child processes
 * (benchmarks/lib/ws-fanout-client.ts), bound to `--fanout-addresses` loopback source addresses,
 * and are spread over `--edges` edge processes (one by default); each edge's open-files limit
 * (/proc/<pid>/limits) caps how many it can hold, and the run says so.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { relative, resolve } from 'node:path';
import { cliArgs } from '../lib/cli.js';
import pg from 'pg';
import WebSocket from 'ws';
import { createDb } from '../postgres/client.js';
import { migratePostgres } from '../postgres/migrate.js';
import { repoPath, ROOT } from '../lib/paths.js';
import { NODE_FLAGS, PROCESS_ENTRIES, PROCESS_ENV } from '../apps/processes.js';
import { benchConfig, machine, percentile, round, startProcess, waitFor, writeResult } from './lib/harness.js';
import { gcAndMemory, heapSnapshot } from './lib/inspector.js';
import { monoMs, type FromClient, type ToClient } from './lib/ws-fanout-client.js';

const { values: args } = cliArgs(
  'npm run bench:ws --',
  'The live stream end to end: ingest → push latency at a steady rate, and fan-out of single events to many connections with the edge memory per connection (benchmarks/README.md).',
  {
    options: {
      rate: { type: 'string', default: '1000' },
      duration: { type: 'string', default: '20' },
      subscribers: { type: 'string', default: '100' },
      batch: { type: 'string', default: '20' },
      'fanout-connections': { type: 'string', default: '10000' },
      'fanout-events': { type: 'string', default: '40' },
      'fanout-interval-ms': { type: 'string', default: '500' },
      /** Client processes the fan-out connections are spread over (each under the per-process open-files limit). */
      'fanout-clients': { type: 'string' },
      /** Loopback source addresses the fan-out connections are spread over (each has its own ephemeral port range). */
      'fanout-addresses': { type: 'string' },
      /** Open every requested connection even beyond what the edge's open-files limit allows (default: stop at that limit and say so). */
      'fanout-beyond-limit': { type: 'boolean', default: false },
      /** Edge processes (ports 3194, 3195, …) the fan-out connections are spread over, as instances behind a load balancer would be; the steady phase uses the first. */
      edges: { type: 'string', default: '1' },
      /** Writes a heap snapshot of the edge with the fan-out connections open (to see what a connection holds). */
      'heap-snapshot': { type: 'string' },
      /** Another build of the edge to run (a copy of dist/ elsewhere), with the edge's own Node flags and environment: for A/B runs. */
      'edge-entry': { type: 'string' },
    },
  },
);
const RATE = Number(args.rate);
const DURATION_S = Number(args.duration);
const SUBSCRIBERS = Number(args.subscribers);
const BATCH = Number(args.batch);
const FANOUT_CONNECTIONS = Number(args['fanout-connections']);
const FANOUT_EVENTS = Number(args['fanout-events']);
const FANOUT_INTERVAL_MS = Number(args['fanout-interval-ms']);
const FANOUT_CLIENTS = Number(args['fanout-clients'] ?? Math.max(1, Math.ceil(FANOUT_CONNECTIONS / 10_000)));
const FANOUT_ADDRESSES = Number(args['fanout-addresses'] ?? Math.max(1, Math.ceil(FANOUT_CONNECTIONS / 10_000)));
const EDGES = Number(args.edges);
if (!Number.isInteger(EDGES) || EDGES < 1 || EDGES > 8) throw new Error('--edges takes 1 to 8');
/** Open descriptors the edge keeps for itself beyond those counted at the start (Postgres pool, Kafka, Redis reconnects). */
const FD_MARGIN = 32;
const loadAtStart = loadavg().map((l) => round(l, 2));

const { up } = (await import(repoPath('scripts', 'stack.mjs'))) as { up: (o: { quiet: boolean }) => Promise<unknown> };
await up({ quiet: true });

const runId = Date.now().toString(36);
const API_PORT = 3193;
const EDGE_PORT = 3194;
const EDGE_PORTS = Array.from({ length: EDGES }, (_, i) => EDGE_PORT + i);
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
const EDGE_ENTRY = args['edge-entry'] ? relative(ROOT, resolve(args['edge-entry'])) : PROCESS_ENTRIES.edge;
// startProcess gives only the usual entry its flags and environment: another build gets the same through NODE_OPTIONS.
const otherBuild = EDGE_ENTRY !== PROCESS_ENTRIES.edge;
/** Each edge is its own instance (own consumer group, own port); its inspector (loopback only, port + 1000) lets the bench run a full GC and read the heap after it. */
const edges = EDGE_PORTS.map((port, i) => ({
  port,
  inspectPort: port + 1000,
  ...startProcess(`edge${i}`, EDGE_ENTRY, {
    ...env,
    ...(otherBuild ? PROCESS_ENV : {}),
    EDGE_PORT: String(port),
    ...(i > 0 ? { EDGE_METRICS_PORT: '0' } : {}),
    NODE_OPTIONS: [env.NODE_OPTIONS, ...(otherBuild ? NODE_FLAGS.edge : []), `--inspect=127.0.0.1:${port + 1000}`]
      .filter(Boolean)
      .join(' '),
  }),
}));
const base = `http://127.0.0.1:${API_PORT}`;
const wsUrlOf = (port: number) => `ws://127.0.0.1:${port}/ws`;
await waitFor('api', async () => (await fetch(`${base}/api/status`)).ok);
for (const e of edges) await waitFor(`edge on ${e.port}`, async () => (await fetch(`http://127.0.0.1:${e.port}/health`)).ok);
/** CPU seconds of every edge process together. */
const edgesCpuS = () => edges.reduce((a, e) => a + procStat(e.child.pid).cpuS, 0);

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
const venueB = (await call('/api/venues', { method: 'POST', key, body: JSON.stringify({ name: 'Fan-out', timezone: 'UTC' }) }))
  .id as string;

/** Sent-at time (performance.now) of each event, by its sequence number (its `occupancy` metric). */
const sentAt = new Map<number, number>();
let seq = 0;

/** One ingest request of `n` density occupancy events numbered from `seq`. */
async function ingest(venueId: string, n: number): Promise<number> {
  const first = seq;
  seq += n;
  const timestamp = new Date().toISOString();
  const events = Array.from({ length: n }, (_, i) => ({
    type: 'occupancy',
    timestamp,
    payload: { space_id: 'spc_1', occupancy: first + i },
  }));
  const t0 = monoMs();
  for (let i = 0; i < n; i++) sentAt.set(first + i, t0);
  const res = await fetch(`${base}/ingest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ venue_id: venueId, connector_type: 'density', events }),
  });
  await res.arrayBuffer();
  if (res.status !== 202) throw new Error(`ingest answered ${res.status}`);
  return monoMs() - t0;
}

interface Sub {
  ws: WebSocket;
  received: number;
}

/** Opens `n` connections (at most 200 handshakes at a time) subscribed to the venue; each push's latency goes to `sink`. */
async function openSubscribers(n: number, venueId: string, sink: number[]): Promise<{ subs: Sub[]; failed: number }> {
  const subs: Sub[] = [];
  let failed = 0;
  const openOne = () =>
    new Promise<void>((resolve) => {
      const ws = new WebSocket(`${wsUrlOf(EDGE_PORT)}?token=${key}`, { perMessageDeflate: false });
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
          const now = monoMs();
          const n = m.data.metrics.occupancy;
          const t0 = sentAt.get(n);
          if (t0 !== undefined) sink.push(now - t0);
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

const stats = (xs: ArrayLike<number>) => {
  const s = Array.from(Float64Array.from(xs).sort());
  return {
    samples: s.length,
    p50: round(percentile(s, 50)),
    p95: round(percentile(s, 95)),
    p99: round(percentile(s, 99)),
    max: round(s[s.length - 1] ?? NaN),
  };
};

// ---- (a) steady rate to subscribers ----
const steadyLatency: number[] = [];
const steady = await openSubscribers(SUBSCRIBERS, venueA, steadyLatency);
const requestMs: number[] = [];
const cpu0 = { edge: edgesCpuS(), api: procStat(api.child.pid).cpuS };
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
const steadyCpu = { edge: round(edgesCpuS() - cpu0.edge), api: round(procStat(api.child.pid).cpuS - cpu0.api) };
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
console.log(
  `(a) ${steadyResult.pushesReceived}/${expectedSteady} pushes; ingest → push p50 ${steadyResult.ingestToPushMs.p50} / p95 ${steadyResult.ingestToPushMs.p95} / p99 ${steadyResult.ingestToPushMs.p99} ms`,
);
for (const s of steady.subs) s.ws.terminate();
await new Promise((r) => setTimeout(r, 1000));

// ---- (b) fan-out to many connections, and memory per connection ----
/** An edge's /health, or null when it does not answer within 5 s (an edge out of descriptors accepts nothing, /health included). */
const edgeHealth = async (port: number) => {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(5000) });
    return (await res.json()) as { websocket: { connections: number }; memory: { heapUsedBytes: number } };
  } catch {
    return null;
  }
};

/** The edge's open-files limit (soft, hard) and open descriptors: how many connections it can hold. */
function fdState(pid: number | undefined) {
  const limits = /Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
  const num = (v: string | undefined) => (v === undefined || v === 'unlimited' ? Infinity : Number(v));
  return { soft: num(limits?.[1]), hard: num(limits?.[2]), open: readdirSync(`/proc/${pid}/fd`).length };
}
const fdsAtStart = edges.map((e) => fdState(e.child.pid));
const fdAtStart = fdsAtStart[0]!;
// The connections are spread evenly, so the fullest edge (the least room) bounds them.
const fdCapacity = EDGES * Math.min(...fdsAtStart.map((f) => f.soft - f.open - FD_MARGIN));
const beyondLimit = FANOUT_CONNECTIONS > fdCapacity;
const attempted = beyondLimit && !args['fanout-beyond-limit'] ? fdCapacity : FANOUT_CONNECTIONS;
console.log(
  `(b) ${EDGES > 1 ? `${EDGES} edges, each with ` : ''}edge open-files limit ${fdAtStart.soft} (hard ${fdAtStart.hard}), ${fdAtStart.open} open: room for about ${fdCapacity} connections` +
    (beyondLimit
      ? `; ${FANOUT_CONNECTIONS} asked for: ${args['fanout-beyond-limit'] ? 'opening them all anyway (--fanout-beyond-limit)' : `opening ${attempted} (raise the edge's limit, ulimit -n / LimitNOFILE, to hold more)`}`
      : ''),
);

// Source addresses 127.0.X.1…: X changes per run so the ports an earlier run left in TIME_WAIT never collide.
const octet = 1 + (Date.now() % 250);
const localAddresses = Array.from({ length: FANOUT_ADDRESSES }, (_, i) => `127.0.${octet}.${i + 1}`);
const clients = Array.from({ length: FANOUT_CLIENTS }, () => {
  const child = fork(repoPath('dist', 'benchmarks', 'lib', 'ws-fanout-client.js'), [], {
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return { child, share: 0 };
});
clients.forEach((c, j) => (c.share = Math.floor(attempted / FANOUT_CLIENTS) + (j < attempted % FANOUT_CLIENTS ? 1 : 0)));
const ask = <T extends FromClient['type']>(child: ChildProcess, message: ToClient, reply: T) =>
  new Promise<Extract<FromClient, { type: T }>>((resolve) => {
    const on = (m: FromClient) => {
      if (m.type !== reply) return;
      child.off('message', on);
      resolve(m as Extract<FromClient, { type: T }>);
    };
    child.on('message', on);
    child.send(message);
  });

/** RSS of every edge together. */
const edgesRss = () => edges.reduce((a, e) => a + procStat(e.child.pid).rssBytes, 0);
/** Every edge's /health (null for one that did not answer). */
const edgesHealth = () => Promise.all(edges.map((e) => edgeHealth(e.port)));
/** RSS and heap of every edge together, each read right after a full GC; null when any edge's inspector failed. */
const edgesAfterGc = async () => {
  const each = await Promise.all(edges.map((e) => gcAndMemory(e.inspectPort)));
  return { rss: each.reduce((a, m) => a + m.rss, 0), heapUsed: each.reduce((a, m) => a + m.heapUsed, 0) };
};
const rssBefore = edgesRss();
const healthBefore = await edgesHealth();
const heapBefore = healthBefore.reduce((a, h) => a + (h?.memory.heapUsedBytes ?? NaN), 0);
// The same after a full GC (the steady phase's garbage gone): the baseline of the figures after GC.
const gcBefore = await edgesAfterGc().catch((err: Error) => (console.log(`no GC through the inspector: ${err.message}`), null));
const openStarted = performance.now();
const opened = await Promise.all(
  clients.map((c) =>
    ask(
      c.child,
      {
        type: 'open',
        urls: EDGE_PORTS.map((port) => `${wsUrlOf(port)}?token=${key}`),
        venueId: venueB,
        count: c.share,
        localAddresses,
        concurrency: Math.ceil(200 / FANOUT_CLIENTS),
        timeoutMs: 20_000,
        expectedEvents: FANOUT_EVENTS,
      },
      'opened',
    ),
  ),
);
const openSeconds = (performance.now() - openStarted) / 1000;
const held = opened.reduce((a, o) => a + o.held, 0);
const failures: Record<string, number> = {};
for (const o of opened) for (const [why, n] of Object.entries(o.failures)) failures[why] = (failures[why] ?? 0) + n;
await new Promise((r) => setTimeout(r, 2000));
const rssAfter = edgesRss();
const healthAfter = await edgesHealth();
const health = healthAfter.every((h) => h !== null)
  ? {
      websocket: { connections: healthAfter.reduce((a, h) => a + h!.websocket.connections, 0) },
      memory: { heapUsedBytes: healthAfter.reduce((a, h) => a + h!.memory.heapUsedBytes, 0) },
    }
  : null;
if (!health) console.log('(b) an edge did not answer /health within 5 s: out of descriptors, it accepts no connection at all');
const fdsAfterOpen = edges.map((e) => fdState(e.child.pid).open);
const fdAfterOpen = fdsAfterOpen[0]!;
const rssEachAfter = edges.map((e) => procStat(e.child.pid).rssBytes);
const gcFull = gcBefore && (await edgesAfterGc().catch(() => null));
if (args['heap-snapshot']) {
  await heapSnapshot(edges[0]!.inspectPort, args['heap-snapshot']);
  console.log(`heap snapshot written to ${args['heap-snapshot']}`);
}
await new Promise((r) => setTimeout(r, 1000));

const fanFirst = seq;
const fanSent: number[] = [];
const clientsCpuS = () => clients.reduce((a, c) => a + procStat(c.child.pid).cpuS, 0);
const cpuFan0 = { edge: edgesCpuS(), api: procStat(api.child.pid).cpuS, clients: clientsCpuS() };
for (let i = 0; i < FANOUT_EVENTS; i++) {
  fanSent.push(seq);
  await ingest(venueB, 1);
  await new Promise((r) => setTimeout(r, FANOUT_INTERVAL_MS));
}
const expectedFan = (seq - fanFirst) * held;
const fanDrainUntil = performance.now() + 15_000;
let receivedFan = 0;
while (performance.now() < fanDrainUntil) {
  receivedFan = (await Promise.all(clients.map((c) => ask(c.child, { type: 'count' }, 'count')))).reduce((a, r) => a + r.received, 0);
  if (receivedFan >= expectedFan) break;
  await new Promise((r) => setTimeout(r, 100));
}
const fanCpu = {
  edge: round(edgesCpuS() - cpuFan0.edge),
  api: round(procStat(api.child.pid).cpuS - cpuFan0.api),
  clients: round(clientsCpuS() - cpuFan0.clients),
};
const fanSentAt = fanSent.map((n) => [n, sentAt.get(n)!] as [number, number]);
const reports = await Promise.all(clients.map((c) => ask(c.child, { type: 'report', sentAt: fanSentAt }, 'report')));
const fanLatency = new Float64Array(reports.reduce((a, r) => a + r.latencies.length, 0));
let at = 0;
for (const r of reports) {
  fanLatency.set(r.latencies, at);
  at += r.latencies.length;
}
const lastArrival = new Map<number, number>();
for (const r of reports) for (const [n, t] of r.lastArrival) lastArrival.set(n, Math.max(lastArrival.get(n) ?? 0, t));
const allDelivered = fanSent.filter((n) => lastArrival.has(n)).map((n) => lastArrival.get(n)! - sentAt.get(n)!);
const closeCodes: Record<string, number> = {};
for (const r of reports) for (const [code, n] of Object.entries(r.closeCodes)) closeCodes[code] = (closeCodes[code] ?? 0) + n;

// The edge without the fan-out connections, after a full GC: the baseline of the heap per connection after GC.
await Promise.all(
  clients.map((c) => new Promise((resolve) => (c.child.once('exit', resolve), c.child.send({ type: 'close' } satisfies ToClient)))),
);
await waitFor(
  'the edges to drop the fan-out connections',
  async () => (await edgesHealth()).every((h) => h?.websocket.connections === 0),
  30_000,
).catch(() => undefined);
const gcEmpty = gcFull ? await edgesAfterGc().catch(() => null) : null;

const perConnection = (bytes: number) => (held ? Math.round(bytes / held) : null);
const fanResult = {
  connectionsRequested: FANOUT_CONNECTIONS,
  connectionsAttempted: attempted,
  connectionsHeld: held,
  edgeReportedConnections: health?.websocket.connections ?? null,
  /** False when the edge did not answer /health with the connections open (it accepts nothing once out of descriptors). */
  edgeHealthAnswered: health !== null,
  failedToConnect: attempted - held,
  failures,
  /** Connections refused with 4103 (the edge could not check the key within 5 s) and opened again after a backoff. */
  retriedAfter4103: opened.reduce((a, o) => a + o.retries, 0),
  /** The edge's open-files limit: each connection is a descriptor, so it caps the connections one edge holds. */
  edgeFdLimit: {
    soft: fdAtStart.soft,
    hard: fdAtStart.hard,
    openAtStart: fdAtStart.open,
    openWithConnections: fdAfterOpen,
    roomForConnections: fdCapacity,
  },
  limitedByFdLimit: beyondLimit,
  /** Edge processes the connections were spread over; with more than one, the memory and CPU figures are their sums. */
  edges: EDGES,
  perEdge: edges.map((e, i) => ({
    port: e.port,
    connections: healthAfter[i]?.websocket.connections ?? null,
    fdOpenWithConnections: fdsAfterOpen[i],
    rssMiB: round(rssEachAfter[i]! / 2 ** 20),
  })),
  clientProcesses: FANOUT_CLIENTS,
  sourceAddresses: localAddresses,
  secondsToOpenAndSubscribe: round(openSeconds),
  edgeRssBeforeMiB: round(rssBefore / 2 ** 20),
  edgeRssAfterMiB: round(rssAfter / 2 ** 20),
  edgeBytesPerConnection: perConnection(rssAfter - rssBefore),
  /** The JS heap's share (V8 may not have collected the handshakes' garbage yet: an upper bound). */
  edgeHeapBytesPerConnection: health ? perConnection(health.memory.heapUsedBytes - heapBefore) : null,
  /**
   * RSS and heap with the connections open less before they opened, each read right after a full
   * GC (through the edge's inspector): what the connections keep, without the garbage that makes
   * the two figures above depend on when V8 last collected.
   */
  edgeRssBytesPerConnectionAfterGc: gcFull && gcBefore ? perConnection(gcFull.rss - gcBefore.rss) : null,
  edgeHeapBytesPerConnectionAfterGc: gcFull && gcBefore ? perConnection(gcFull.heapUsed - gcBefore.heapUsed) : null,
  edgeAfterGc:
    gcFull && gcBefore
      ? {
          beforeConnections: { rssMiB: round(gcBefore.rss / 2 ** 20), heapUsedMiB: round(gcBefore.heapUsed / 2 ** 20) },
          withConnections: { rssMiB: round(gcFull.rss / 2 ** 20), heapUsedMiB: round(gcFull.heapUsed / 2 ** 20) },
          afterTheyClosed: gcEmpty && { rssMiB: round(gcEmpty.rss / 2 ** 20), heapUsedMiB: round(gcEmpty.heapUsed / 2 ** 20) },
        }
      : null,
  events: seq - fanFirst,
  pushesExpected: expectedFan,
  pushesReceived: fanLatency.length,
  pushesPerConnection: {
    min: Math.min(...reports.map((r) => r.perConnectionMin)),
    max: Math.max(...reports.map((r) => r.perConnectionMax)),
  },
  closedDuringRun: reports.reduce((a, r) => a + r.closed, 0),
  closeCodes,
  ingestToPushMs: stats(fanLatency),
  ingestToLastConnectionMs: stats(allDelivered),
  /** CPU seconds of the edges (together), the api and the client processes (together) from the first fan-out event until the last push arrived (or the 15 s wait ended). */
  cpuSeconds: fanCpu,
  /** The edges' CPU per push delivered: on one edge, an event reaches its N-th connection after about N times this (one thread). */
  edgeCpuMicrosPerPush: fanLatency.length ? round((fanCpu.edge * 1e6) / fanLatency.length, 2) : null,
  /** The client processes' CPU per push received: on a shared box, the cores the edges do not get. */
  clientCpuMicrosPerPush: fanLatency.length ? round((fanCpu.clients * 1e6) / fanLatency.length, 2) : null,
};
console.log(
  `(b) ${held}/${attempted} connections held (${FANOUT_CONNECTIONS} asked for; edge open-files limit ${fdAtStart.soft}), ${fanResult.edgeBytesPerConnection} B RSS, ` +
    `${fanResult.edgeHeapBytesPerConnection} B heap each (after GC: ${fanResult.edgeRssBytesPerConnectionAfterGc} B RSS, ${fanResult.edgeHeapBytesPerConnectionAfterGc} B heap); ` +
    `${fanResult.pushesReceived}/${expectedFan} pushes; ingest → push p50 ${fanResult.ingestToPushMs.p50} / p99 ${fanResult.ingestToPushMs.p99} ms; ` +
    `to the last connection p99 ${fanResult.ingestToLastConnectionMs.p99} ms`,
);

await Promise.all([...edges.map((e) => e.stop()), api.stop()]);
const allPushes = fanResult.pushesReceived === expectedFan && expectedFan > 0;
const path = writeResult('ws', {
  at: new Date().toISOString(),
  machine: machine(),
  /** The 1-, 5- and 15-minute load averages (uptime) at the start and the end: other work on the box disturbs the latencies. */
  load: { atStart: loadAtStart, atEnd: loadavg().map((l) => round(l, 2)) },
  options: {
    rate: RATE,
    duration: DURATION_S,
    subscribers: SUBSCRIBERS,
    batch: BATCH,
    fanoutConnections: FANOUT_CONNECTIONS,
    fanoutEvents: FANOUT_EVENTS,
    fanoutIntervalMs: FANOUT_INTERVAL_MS,
    fanoutClients: FANOUT_CLIENTS,
    fanoutAddresses: FANOUT_ADDRESSES,
    fanoutBeyondLimit: args['fanout-beyond-limit'],
    edgeEntry: EDGE_ENTRY,
    edges: EDGES,
  },
  steady: steadyResult,
  fanout: fanResult,
  goals: {
    connections10k: {
      goal: '10,000 connections at ≤ 10 KB each',
      held,
      bytesPerConnection: fanResult.edgeBytesPerConnection,
      met: held >= 10_000 && (fanResult.edgeBytesPerConnection ?? Infinity) <= 10_240,
    },
    connections50k: {
      goal: '50,000 connections on one edge at ≤ 2 KB each, every push delivered, ingest → push p99 to the last connection ≤ 200 ms (issue 30)',
      held,
      /** Met only on one edge; with more, the other conditions are judged in `metAcrossEdges`. */
      edges: EDGES,
      edgeFdLimit: fdAtStart.soft,
      bytesPerConnection: fanResult.edgeBytesPerConnection,
      everyPushDelivered: allPushes,
      lastConnectionP99: fanResult.ingestToLastConnectionMs.p99,
      metAcrossEdges:
        held >= 50_000 &&
        (fanResult.edgeBytesPerConnection ?? Infinity) <= 2048 &&
        allPushes &&
        fanResult.ingestToLastConnectionMs.p99 <= 200,
      met:
        EDGES === 1 &&
        held >= 50_000 &&
        (fanResult.edgeBytesPerConnection ?? Infinity) <= 2048 &&
        allPushes &&
        fanResult.ingestToLastConnectionMs.p99 <= 200,
    },
    steadyP99: {
      goal: 'ingest → push p99 ≤ 100 ms at 1,000 events/s to 100 subscribers',
      p99: steadyResult.ingestToPushMs.p99,
      met: RATE >= 1000 && steady.subs.length >= 100 && steadyResult.ingestToPushMs.p99 <= 100,
    },
  },
});
console.log(`wrote ${path}`);
process.exit(0);
