/**
 * `npm run bench:soak -- --minutes 30`: a long, steady load. The ingest fleet (benchmarks/lib/fleet.ts)
 * sends at half the maximum rate measured by `npm run bench:ingest` (benchmarks/results/ingest.json;
 * `--rate` overrides) while WebSocket subscribers watch every venue. Every minute: the RSS of each
 * process, the consumer lag of the sink and of each processor group (in events-topic messages: one
 * per ingest request, so `--batch` events each), the ingest latency percentiles of that minute,
 * the CPU share of each process and engine, and how far the derive job's history is behind (seconds
 * since its last finished round started). Reported: RSS growth after warm-up (goal < 10 %), whether
 * lag stayed bounded. Results in benchmarks/results/soak.json.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { createCh } from '../clickhouse/client.js';
import { progressCursor, serverNow } from '../clickhouse/queries/derive.js';
import { derivedTopicNames, topicNames } from '../lib/topology.js';
import { createKafka, topicOffsets } from '../lib/kafka.js';
import { createLogger } from '../lib/logger.js';
import { repoPath } from '../lib/paths.js';
import {
  benchConfig,
  cpuSecondsOf,
  dropEarlierRunTopics,
  enginePids,
  freshDatabases,
  machine,
  machineCpu,
  percentile,
  round,
  rssMbOf,
  startPipelines,
  startProcess,
  waitFor,
  writeResult,
} from './lib/harness.js';
import { Fleet, type FleetTenant } from './lib/fleet.js';
import { LagInTime } from './lib/lag-time.js';
import { gcAndMemory, heapSnapshot } from './lib/inspector.js';
import { cliArgs } from '../lib/cli.js';

const { values: args } = cliArgs(
  'npm run bench:soak --',
  'A long run at a steady rate: lag, RSS and latency sampled over time (benchmarks/README.md).',
  {
    options: {
      minutes: { type: 'string', default: '30' },
      rate: { type: 'string', default: '0' },
      clients: { type: 'string', default: '4' },
      batch: { type: 'string', default: '500' },
      operators: { type: 'string', default: '10' },
      subscribers: { type: 'string', default: '2' },
      // Recurring visitors (the number of distinct devices a day's visits are made of); 0: every
      // sighting a new device.
      devices: { type: 'string', default: '100000' },
      // Pipeline processes: each takes a share of every group's partitions (how the pipeline scales).
      pipelines: { type: 'string', default: '1' },
      'sample-seconds': { type: 'string', default: '60' },
      // A directory for the pipelines' logs (info: processor stats each minute, rebalances, restores;
      // debug, with --log-level: every sink write, how long its batch was held and how long it took).
      logs: { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
      // Each process's heap after a full GC (through its inspector) at warm-up, every 5th sample and
      // at the end: whether RSS growth is live heap. Each GC pauses that process for up to a second.
      heap: { type: 'boolean', default: false },
      // With --heap: a directory for each process's heap snapshot at the end (DevTools format).
      'heap-snapshots': { type: 'string' },
    },
  },
);
const MINUTES = Number(args.minutes);
const SAMPLE_MS = Number(args['sample-seconds']) * 1000;
const measuredMax = existsSync(repoPath('benchmarks', 'results', 'ingest.json'))
  ? Number(
      (JSON.parse(readFileSync(repoPath('benchmarks', 'results', 'ingest.json'), 'utf8')) as { ingest: { eventsPerSec: number } }).ingest
        .eventsPerSec,
    )
  : 10_000;
const RATE = Number(args.rate) || Math.round(measuredMax / 2);

const { up } = (await import(repoPath('scripts', 'stack.mjs'))) as { up: (o: { quiet: boolean }) => Promise<unknown> };
await up({ quiet: true });

const runId = Date.now().toString(36);
/** The sample that ends warm-up: a fifth of the run, at least the second. */
const warmIndex = (samples: number) => Math.max(1, Math.floor(samples / 5));
const [API_PORT, EDGE_PORT] = [3193, 3194];
const { cfg: baseCfg } = benchConfig({});
const dbUrl = new URL(baseCfg.DATABASE_URL);
dbUrl.pathname = '/venue_soak';
// Each process's /metrics on loopback (pipelines from .pipeline on), read for its event loop's longest stall of each sample.
const METRICS_PORTS = { api: 19464, edge: 19465, pipeline: 19466 };
const { cfg, env } = benchConfig({
  NODE_ENV: 'production',
  LOG_LEVEL: 'warn',
  DATABASE_URL: dbUrl.toString(),
  // A ClickHouse database per run, as bench:ingest's (benchmarks/README.md, "The bench's own dropped database").
  CLICKHOUSE_DATABASE: `venue_soak_${runId}`,
  KAFKA_TOPIC_PREFIX: `soak.${runId}`,
  REDIS_KEY_PREFIX: `soak.${runId}:`,
  RATE_LIMITS_ENABLED: 'false',
  API_PORT: String(API_PORT),
  EDGE_HOST: '127.0.0.1',
  EDGE_PORT: String(EDGE_PORT),
  API_METRICS_PORT: String(METRICS_PORTS.api),
  EDGE_METRICS_PORT: String(METRICS_PORTS.edge),
  PIPELINE_METRICS_PORT: '0',
});
console.log(
  `soak  ${MINUTES} min at ${RATE} events/s (${Number(args.rate) ? 'as given' : `half of the measured ${measuredMax}`}), ${args.subscribers} subscribers per venue, ${Number(args.devices) || 'only new'} devices`,
);

await freshDatabases(baseCfg.DATABASE_URL, cfg, 'venue_soak', 'venue_soak');
await dropEarlierRunTopics(cfg.KAFKA_BROKERS, 'soak', cfg.KAFKA_TOPIC_PREFIX);

const logDir = args.logs;
if (logDir) mkdirSync(logDir, { recursive: true });
// With --heap every process listens for the inspector on loopback: api 9330, edge 9331, pipelines from 9332.
const INSPECT = { api: 9330, edge: 9331, pipeline: 9332 };
const inspectEnv = (port: number): Record<string, string> =>
  args.heap ? { NODE_OPTIONS: [env.NODE_OPTIONS, `--inspect=127.0.0.1:${port}`].filter(Boolean).join(' ') } : {};
const pipelines = startPipelines(
  Number(args.pipelines),
  logDir ? { ...env, LOG_LEVEL: args['log-level'] } : env,
  logDir ? (name, line) => appendFileSync(join(logDir, `${name}.log`), line + '\n') : undefined,
  (i) => ({ ...inspectEnv(INSPECT.pipeline + i), PIPELINE_METRICS_PORT: String(METRICS_PORTS.pipeline + i) }),
);
const procs = {
  api: startProcess('api', 'dist/apps/api/main.js', { ...env, ...inspectEnv(INSPECT.api) }),
  ...Object.fromEntries(pipelines.map((p) => [p.name, p])),
  edge: startProcess('edge', 'dist/apps/edge/main.js', { ...env, ...inspectEnv(INSPECT.edge) }),
};
const inspectPorts: Record<string, number> = {
  api: INSPECT.api,
  edge: INSPECT.edge,
  ...Object.fromEntries(pipelines.map((p, i) => [p.name, INSPECT.pipeline + i])),
};
const metricsPorts: Record<string, number> = {
  api: METRICS_PORTS.api,
  edge: METRICS_PORTS.edge,
  ...Object.fromEntries(pipelines.map((p, i) => [p.name, METRICS_PORTS.pipeline + i])),
};
/**
 * The longest its event loop was blocked since the previous read, ms, per process (NaN where the
 * metrics did not answer): prom-client's event-loop delay, reset at every read. A stall in one
 * pipeline holds back the partitions of every group it owns at once.
 */
async function eventLoopMaxMs(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [name, port] of Object.entries(metricsPorts)) {
    try {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
      const line = text.split('\n').find((l) => l.startsWith('nodejs_eventloop_lag_max_seconds'));
      out[name] = line ? round(Number(line.slice(line.lastIndexOf(' ') + 1)) * 1000, 0) : NaN;
    } catch {
      out[name] = NaN;
    }
  }
  return out;
}
/** Heap used after a full GC, MB, per process (NaN where the inspector did not answer). */
async function heapAfterGcMb(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [name, port] of Object.entries(inspectPorts))
    out[name] = await gcAndMemory(port).then(
      (m) => round(m.heapUsed / 2 ** 20),
      (err: Error) => (console.log(`no GC through ${name}'s inspector: ${err.message}`), NaN),
    );
  return out;
}
process.on('exit', () => {
  for (const p of Object.values(procs)) if (p.child.exitCode === null) p.child.kill('SIGKILL');
});
const base = `http://127.0.0.1:${API_PORT}`;
await waitFor('api', async () => (await fetch(`${base}/health`)).ok);

async function call(path: string, init: RequestInit & { key?: string } = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(init.headers as Record<string, string>) };
  if (init.key) headers.authorization = `Bearer ${init.key}`;
  const res = await fetch(base + path, { ...init, headers });
  const body = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

const tenants: FleetTenant[] = [];
for (let i = 0; i < Number(args.operators); i++) {
  const op = await call('/api/operators', {
    method: 'POST',
    headers: { 'x-admin-key': cfg.ADMIN_SECRET },
    body: JSON.stringify({ name: `soak ${i}`, email: `soak${i}@example.com`, plan: 'pro' }),
  });
  await call(`/api/operators/${op.operator_id}/plan`, {
    method: 'PUT',
    headers: { 'x-admin-key': cfg.ADMIN_SECRET },
    body: JSON.stringify({ plan: 'enterprise' }),
  });
  const venue = await call('/api/venues', {
    method: 'POST',
    key: op.api_key as string,
    body: JSON.stringify({ name: `Soak ${i}`, timezone: 'UTC' }),
  });
  tenants.push({ key: op.api_key as string, venueId: venue.id as string, kind: i % 3 === 2 ? 'occupancy' : 'devices' });
}

// Subscribers: each counts the pushes it receives.
let pushes = 0;
const sockets: WebSocket[] = [];
await waitFor('edge', async () => (await fetch(`http://127.0.0.1:${EDGE_PORT}/ws`)).status === 426);
for (const t of tenants) {
  for (let s = 0; s < Number(args.subscribers); s++) {
    const ws = new WebSocket(`ws://127.0.0.1:${EDGE_PORT}/ws?token=${encodeURIComponent(t.key)}`);
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as { type?: string; data?: unknown };
      if (m.type === 'connected')
        ws.send(JSON.stringify({ tsSubCmds: [{ cmdId: 1, entityId: t.venueId, keys: ['occupancy', 'devices', 'entries'] }] }));
      else if (m.data) pushes++;
    });
    ws.on('error', () => undefined);
    sockets.push(ws);
  }
}

const kafkaAdmin = createKafka(cfg, createLogger('soak', 'warn'), 'soak-lag').admin();
await kafkaAdmin.connect();
const eventsTopic = topicNames(cfg.KAFKA_TOPIC_PREFIX).events;
const reportsTopic = derivedTopicNames(cfg.KAFKA_TOPIC_PREFIX).ingestReports;
/** Messages `groupId` has not committed on `topic` (connector health reads the ingest reports, one per request). */
async function lagOf(groupId: string, topic = eventsTopic): Promise<number> {
  const ends = new Map((await topicOffsets(kafkaAdmin, topic)).map((o) => [o.partition, Number(o.high)]));
  const [t] = await kafkaAdmin.fetchOffsets({ groupId, topics: [topic] });
  const committed = new Map(t!.partitions.map((p) => [p.partition, Math.max(0, Number(p.offset))]));
  return [...ends].reduce((n, [p, end]) => n + Math.max(0, end - (committed.get(p) ?? 0)), 0);
}

// Every group's time behind its topic's head, looked up four times a second: the goal is within 2 s, and the figure may read up to one interval over.
const lagInTime = new LagInTime(
  kafkaAdmin,
  [
    { name: 'sink', groupId: `${cfg.KAFKA_TOPIC_PREFIX}.sink.events`, topic: eventsTopic },
    { name: 'occupancy', groupId: `${cfg.KAFKA_TOPIC_PREFIX}.proc.occupancy`, topic: eventsTopic },
    { name: 'health', groupId: `${cfg.KAFKA_TOPIC_PREFIX}.proc.health`, topic: reportsTopic },
  ],
  250,
);

const ch = createCh(cfg);
/** How far the derive job's history is behind: seconds since the start of its last finished round (rounds every DERIVE_INTERVAL_MS). */
async function deriveBehindS(): Promise<number> {
  const cursor = await progressCursor(ch, 'derive');
  return cursor === undefined ? NaN : (await serverNow(ch)) - cursor;
}

const fleet = new Fleet({
  urls: [base],
  tenants,
  batchSize: Number(args.batch),
  clients: Number(args.clients),
  clientTimeoutMs: 15_000,
  runTag: runId,
  rate: RATE,
  devices: Number(args.devices),
});
const deadline = Date.now() + MINUTES * 60_000;
const load = fleet.ingest(0, () => Date.now() < deadline);
lagInTime.start();
const samples: Array<Record<string, unknown>> = [];
let seen = 0;
// CPU per process over each sample: ours and the engines', and the whole machine's busy share.
const cpuPids = { ...Object.fromEntries(Object.entries(procs).map(([name, p]) => [name, p.child.pid])), ...enginePids() };
const cpuNow = () => ({ at: Date.now(), machine: machineCpu(), of: cpuSecondsOf(cpuPids) });
let cpuBefore = cpuNow();
while (Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, Math.min(SAMPLE_MS, deadline - Date.now())));
  const cpuAfter = cpuNow();
  const seconds = (cpuAfter.at - cpuBefore.at) / 1000;
  const cpuPercent = {
    machine: round(
      ((cpuAfter.machine.busy - cpuBefore.machine.busy) / (cpuAfter.machine.total - cpuBefore.machine.total)) * 100 * machine().cores,
      0,
    ),
    ...Object.fromEntries(
      Object.keys(cpuPids).map((name) => [name, round(((cpuAfter.of[name]! - cpuBefore.of[name]!) / seconds) * 100, 0)]),
    ),
  };
  cpuBefore = cpuAfter;
  const waits = fleet.stats.batchWaits.slice(seen).sort((a, b) => a - b);
  seen = fleet.stats.batchWaits.length;
  const heapDue = args.heap && (samples.length === warmIndex((MINUTES * 60_000) / SAMPLE_MS) || (samples.length + 1) % 5 === 0);
  const sample = {
    minute: round((samples.length + 1) * (SAMPLE_MS / 60_000), 2),
    accepted: fleet.stats.eventsAccepted,
    pushes,
    rssMb: Object.fromEntries(Object.entries(procs).map(([name, p]) => [name, rssMbOf(p.child.pid)])),
    lag: {
      sink: await lagOf(`${cfg.KAFKA_TOPIC_PREFIX}.sink.events`).catch(() => NaN),
      occupancy: await lagOf(`${cfg.KAFKA_TOPIC_PREFIX}.proc.occupancy`).catch(() => NaN),
      health: await lagOf(`${cfg.KAFKA_TOPIC_PREFIX}.proc.health`, reportsTopic).catch(() => NaN),
    },
    behindS: lagInTime.worst(),
    deriveBehindS: await deriveBehindS().catch(() => NaN),
    latencyMs: { p50: round(percentile(waits, 50)), p95: round(percentile(waits, 95)), p99: round(percentile(waits, 99)) },
    cpuPercent,
    eventLoopMaxMs: await eventLoopMaxMs(),
    ...(heapDue ? { heapAfterGcMb: await heapAfterGcMb() } : {}),
  };
  samples.push(sample);
  console.log(JSON.stringify(sample));
}
await load;
lagInTime.stop();
const finalHeap = args.heap ? await heapAfterGcMb() : undefined;
const snapshotDir = args['heap-snapshots'];
if (args.heap && snapshotDir) {
  mkdirSync(snapshotDir, { recursive: true });
  for (const [name, port] of Object.entries(inspectPorts))
    await heapSnapshot(port, join(snapshotDir, `${name}.heapsnapshot`)).catch((err: Error) =>
      console.log(`no heap snapshot of ${name}: ${err.message}`),
    );
}
for (const ws of sockets) ws.close();
await kafkaAdmin.disconnect();
for (const p of Object.values(procs)) await p.stop();
await ch.close();

// Growth: the last sample against the first after warm-up (a fifth of the run, at least one sample).
const warm = samples[Math.min(samples.length - 1, warmIndex(samples.length))] as
  { rssMb: Record<string, number>; heapAfterGcMb?: Record<string, number> } | undefined;
const last = samples.at(-1) as { rssMb: Record<string, number>; lag: Record<string, number> } | undefined;
const growth =
  warm && last
    ? Object.fromEntries(Object.keys(last.rssMb).map((k) => [k, round(((last.rssMb[k]! - warm.rssMb[k]!) / warm.rssMb[k]!) * 100, 1)]))
    : {};
const maxLag = Math.max(...samples.map((s) => Math.max(...Object.values(s.lag as Record<string, number>).filter(Number.isFinite))));
// Seconds behind, worst per group over the samples after warm-up (the goal: every group within 2 s).
const afterWarm = samples.slice(warmIndex(samples.length)) as Array<{ behindS: Record<string, number> }>;
const maxBehindS = Object.fromEntries(
  Object.keys(afterWarm[0]?.behindS ?? {}).map((k) => [
    k,
    round(Math.max(...afterWarm.map((s) => s.behindS[k]!).filter(Number.isFinite)), 1),
  ]),
);
const result = {
  benchmark: 'soak',
  at: new Date().toISOString(),
  machine: machine(),
  settings: {
    minutes: MINUTES,
    offeredEventsPerSec: RATE,
    measuredMaxEventsPerSec: measuredMax,
    devices: Number(args.devices) || 'every sighting new',
    pipelines: Number(args.pipelines),
    subscribers: sockets.length,
    sampleSeconds: SAMPLE_MS / 1000,
  },
  totals: { accepted: fleet.stats.eventsAccepted, refusals: fleet.stats.refusals, violations: fleet.stats.violations.length, pushes },
  rssGrowthPercentAfterWarmUp: growth,
  rssGoalMet: Object.values(growth).every((g) => g < 10),
  ...(finalHeap && warm?.heapAfterGcMb
    ? {
        heapAfterGcMb: { warm: warm.heapAfterGcMb, end: finalHeap },
        heapGrowthPercentAfterWarmUp: Object.fromEntries(
          Object.keys(finalHeap).map((k) => [k, round(((finalHeap[k]! - warm.heapAfterGcMb![k]!) / warm.heapAfterGcMb![k]!) * 100, 1)]),
        ),
      }
    : {}),
  lagUnit: 'messages of the topic a group reads (an ingest request of the events topic is several: runs of about 32 KB)',
  maxLag,
  maxBehindSAfterWarmUp: maxBehindS,
  behindGoalMet: Object.values(maxBehindS).every((s) => s <= 2),
  finalLag: last?.lag,
  maxDeriveBehindS: Math.max(...samples.map((s) => Number(s.deriveBehindS)).filter(Number.isFinite)),
  samples,
};
const path = writeResult('soak', result);
console.log(
  `\nRSS growth after warm-up ${JSON.stringify(growth)} %, max lag ${maxLag} messages, at most ${JSON.stringify(maxBehindS)} s behind after warm-up, written to ${path}`,
);
process.exit(0);
