/**
 * `npm run bench:ingest`: drives POST /ingest with realistic 1,000-event batches from concurrent
 * clients spread over many operators (each operator may send 100 ingest requests a minute), against
 * a real api and pipeline on the local stack, and reports accepted events/s, request latency, the
 * lag until rows are queryable in ClickHouse, how far each stream processor lags behind the events
 * topic when the load ends and how long it takes to catch up (with the pipeline's RSS then), and
 * Kafka's own producer ceiling on this machine.
 */
import { spawnSync } from 'node:child_process';
import { createCh, chRows, chsql } from '../clickhouse/client.js';
import { deriveCaughtUp, serverNow } from '../clickhouse/queries/derive.js';
import { repoPath } from '../lib/paths.js';
import { derivedTopicNames, topicNames } from '../lib/topology.js';
import { createKafka, topicOffsets } from '../lib/kafka.js';
import { createLogger } from '../lib/logger.js';
import { ingestBody, randomMac, type BenchVenue } from './lib/requests.js';
import {
  benchConfig,
  cpuSecondsOf,
  dropEarlierRunTopics,
  cpuShare,
  enginePids,
  freshDatabases,
  startFrontDoor,
  machine,
  machineCpu,
  percentile,
  round,
  rssMbOf,
  settled,
  startPipelines,
  startProcess,
  waitFor,
  writeResult,
} from './lib/harness.js';
import { cliArgs } from '../lib/cli.js';

const { values: args } = cliArgs(
  'npm run bench:ingest --',
  'Load test of POST /ingest through to every processor: throughput, latency and CPU per event per process (benchmarks/README.md).',
  {
    options: {
      duration: { type: 'string', default: '20' },
      warmup: { type: 'string', default: '10' },
      clients: { type: 'string', default: '8' },
      operators: { type: 'string', default: '40' },
      batch: { type: 'string', default: '1000' },
      'perf-records': { type: 'string', default: '500000' },
      rate: { type: 'string', default: '0' },
      'new-devices': { type: 'string', default: '0.1' },
      apis: { type: 'string', default: '1' },
      pipelines: { type: 'string', default: '1' },
      'front-door': { type: 'boolean', default: false },
      out: { type: 'string' },
    },
  },
);
const DURATION_S = Number(args.duration);
/**
 * Seconds of the same load before the measured one, caught up before it starts (not counted): the
 * processes compile their hot code and fill their caches then, as a deployment's have long since.
 * A cold start's compiling is a fixed cost that a 20-second run would spread over its events
 * (benchmarks/README.md, "Warm processes"). `0` measures from a cold start.
 */
const WARMUP_S = Number(args.warmup);
const CLIENTS = Number(args.clients);
const OPERATORS = Number(args.operators);
const BATCH = Number(args.batch);
/** Offered load in events/s; 0 sends as fast as the service answers. A paced run shows the lag at a sustainable load. */
const RATE = Number(args.rate);
/** Share of Meraki sightings from a device never seen before (1: every sighting a new device); the rest from a pool of 2,000 per venue. */
const NEW_DEVICES = Number(args['new-devices']);
const DEVICE_POOL = 2000;
/** Api instances; the clients spread their requests over them, as the front door does. */
const APIS = Number(args.apis);
/** Pipeline processes; each takes a share of every consumer group's partitions (how the pipeline scales out). */
const PIPELINES = Number(args.pipelines);
/** Send through nginx (the stack's front door), which balances over the api instances, instead of to each instance in turn. */
const FRONT_DOOR = args['front-door'];

const { up } = (await import(repoPath('scripts', 'stack.mjs'))) as { up: (o: { quiet: boolean }) => Promise<unknown> };
await up({ quiet: true });

const runId = Date.now().toString(36);
/**
 * Each run's ClickHouse database has a name of its own: ext4 places a new directory under one
 * marked `chattr +T` (the stack marks ClickHouse's) in a block group chosen from its name's hash, so
 * the run's parts are not written among the inodes the last run's dropped database just freed
 * (benchmarks/README.md, "The bench's own dropped database").
 */
const INGEST_DATABASES = 'venue_ingest';
const API_PORT = 3190;
/** The api's Prometheus endpoint: the server-side split of the request latency is read from it. */
const API_METRICS_PORT = 3290;
const FRONT_DOOR_PORT = 3380;
const { cfg: baseCfg } = benchConfig({});
const dbUrl = new URL(baseCfg.DATABASE_URL);
dbUrl.pathname = '/venue_bench';
const { cfg, env } = benchConfig({
  NODE_ENV: 'production',
  LOG_LEVEL: 'warn',
  DATABASE_URL: dbUrl.toString(),
  CLICKHOUSE_DATABASE: `${INGEST_DATABASES}_${runId}`,
  KAFKA_TOPIC_PREFIX: `bench.${runId}`,
  REDIS_KEY_PREFIX: `bench.${runId}:`,
  API_PORT: String(API_PORT),
});

console.log(
  `bench:ingest  ${DURATION_S}s after ${WARMUP_S}s of warm-up, ${CLIENTS} clients, ${OPERATORS} operators, ${BATCH}-event batches, ${RATE ? `${RATE} events/s offered` : 'unpaced'}, ${APIS} api instance(s), ${PIPELINES} pipeline process(es), ${NEW_DEVICES * 100} % new devices`,
);

// Fresh databases for the run.
await freshDatabases(baseCfg.DATABASE_URL, cfg, 'venue_bench', INGEST_DATABASES);
// bench:query keeps its data set (and topics) between runs.
await dropEarlierRunTopics(cfg.KAFKA_BROKERS, 'bench', cfg.KAFKA_TOPIC_PREFIX, ['bench.query']);

// Kafka's own producer, same broker, same acks, message size of a canonical event: the ceiling.
const sampleEventBytes = 520;
const kafkaLibs = repoPath('.stack', 'kafka', 'libs');
const perfTopic = `bench.${runId}.perf`;
spawnSync(
  process.execPath,
  [
    '-e',
    `
  const { Kafka, logLevel } = require('kafkajs');
  const a = new Kafka({ brokers: ${JSON.stringify(cfg.KAFKA_BROKERS)}, logLevel: logLevel.NOTHING }).admin();
  a.connect().then(() => a.createTopics({ topics: [{ topic: '${perfTopic}', numPartitions: ${cfg.KAFKA_PARTITIONS} }], waitForLeaders: true })).then(() => a.disconnect());
`,
  ],
  { stdio: 'inherit' },
);
const perf = spawnSync(
  'java',
  [
    '-Xmx512m',
    '-cp',
    `${kafkaLibs}/*`,
    '-Dlog4j.configuration=file:' + repoPath('stack', 'kafka', 'log4j.properties'),
    'org.apache.kafka.tools.ProducerPerformance',
    '--topic',
    perfTopic,
    '--num-records',
    String(args['perf-records']),
    '--record-size',
    String(sampleEventBytes),
    '--throughput',
    '-1',
    '--producer-props',
    `bootstrap.servers=${cfg.KAFKA_BROKERS.join(',')}`,
    'acks=all',
    'linger.ms=5',
    'batch.size=262144',
    'compression.type=none',
  ],
  { encoding: 'utf8' },
);
const perfLine =
  perf.stdout
    .trim()
    .split('\n')
    .filter((l) => /records sent/.test(l))
    .pop() ?? '';
const kafkaCeiling = Number(/([\d.]+) records\/sec/.exec(perfLine)?.[1] ?? NaN);
console.log(`kafka ProducerPerformance (acks=all, ${sampleEventBytes} B records): ${round(kafkaCeiling, 0)} records/s`);

// The service under test.
const apis = Array.from({ length: APIS }, (_, i) =>
  startProcess(APIS > 1 ? `api-${i + 1}` : 'api', 'dist/apps/api/main.js', {
    ...env,
    API_PORT: String(API_PORT + i),
    API_METRICS_PORT: String(API_METRICS_PORT + i),
  }),
);
// The processors log their state size (entries held) when they stop: read from the pipelines' logs
// (with several pipelines, per process: one that stops last may have taken over others' partitions).
const processorState: Record<string, number> = {};
const pipelines = startPipelines(PIPELINES, { ...env, LOG_LEVEL: 'info' }, (name, line) => {
  if (!line.includes('"processor stopped"')) return;
  try {
    const entry = JSON.parse(line) as { processor?: string; stats?: { stateEntries?: number } };
    if (entry.processor) processorState[PIPELINES > 1 ? `${name}.${entry.processor}` : entry.processor] = entry.stats?.stateEntries ?? NaN;
  } catch {
    // not a JSON log line: nothing to read
  }
});
const base = `http://127.0.0.1:${API_PORT}`;
const apiPorts = apis.map((_, i) => API_PORT + i);
const apiUrls = apiPorts.map((port) => `http://127.0.0.1:${port}`);
for (const b of apiUrls) await waitFor('api', async () => (await fetch(`${b}/health`)).ok);
const frontDoor = FRONT_DOOR ? await startFrontDoor(apiPorts, FRONT_DOOR_PORT) : null;
const bases = frontDoor ? [frontDoor.url] : apiUrls;

async function call(path: string, init: RequestInit & { key?: string } = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(init.headers as Record<string, string>) };
  if (init.key) headers.authorization = `Bearer ${init.key}`;
  const res = await fetch(base + path, { ...init, headers });
  const body = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

interface Tenant extends BenchVenue {
  key: string;
}

const tenants: Tenant[] = [];
for (let i = 0; i < OPERATORS; i++) {
  const op = await call('/api/operators', {
    method: 'POST',
    headers: { 'x-admin-key': cfg.ADMIN_SECRET },
    body: JSON.stringify({ name: `bench ${i}`, email: `bench${i}@example.com`, plan: 'pro' }),
  });
  const key = op.api_key as string;
  const venue = await call('/api/venues', { method: 'POST', key, body: JSON.stringify({ name: `Venue ${i}`, timezone: 'Europe/Berlin' }) });
  const connector = i % 4 === 3 ? 'density' : 'meraki';
  tenants.push({
    key,
    venueId: venue.id as string,
    connector,
    pool: connector === 'meraki' ? Array.from({ length: DEVICE_POOL }, randomMac) : [],
  });
}

// The probe: a separate operator sends a small batch every second and times until it is queryable.
const probeOp = await call('/api/operators', {
  method: 'POST',
  headers: { 'x-admin-key': cfg.ADMIN_SECRET },
  body: JSON.stringify({ name: 'probe', email: 'probe@example.com', plan: 'pro' }),
});
const probeVenue = await call('/api/venues', {
  method: 'POST',
  key: probeOp.api_key as string,
  body: JSON.stringify({ name: 'Probe', timezone: 'UTC' }),
});

const chBench = createCh(cfg);
// By operator and venue, the raw table's key prefix: the probe polls and must not scan the table each time.
// Each poll costs ClickHouse ~1 ms of CPU, which the system's figure counts: every 50 ms that was about 1 µs per
// event of a default run (827 polls, 0.93 CPU-s); every 250 ms costs a fifth of it, for a lag of 10–30 s measured
// to within 2 % (benchmarks/README.md, "The bench's own queries").
const countFor = async (operatorId: string, venueId: string) =>
  Number(
    (
      await chRows<{ n: string }>(
        chBench,
        chsql`SELECT count() AS n FROM events WHERE operator_id = toUUID(${operatorId}) AND venue_id = toUUID(${venueId})`,
      )
    )[0]?.n ?? 0,
  );
/** How often the bench asks whether the probe's event is queryable, and whether the sink, the processors and the derive job caught up. */
const POLL_QUERYABLE_MS = 250;
const POLL_CAUGHT_UP_MS = 500;
const countAll = async () => Number((await chRows<{ n: string }>(chBench, chsql`SELECT count() AS n FROM events`))[0]?.n ?? 0);

const latencies: number[] = [];
let accepted = 0;
let rejected = 0;
let failures = 0;
const statusCounts: Record<number, number> = {};
const engines = enginePids();
const cpuNow = () => {
  const ours = [...apis, ...pipelines].map((p) => p.child.pid);
  const of = cpuSecondsOf({
    ...Object.fromEntries(ours.map((pid) => [String(pid), pid])),
    kafka: engines.kafka,
    clickhouse: engines.clickhouse,
    postgres: engines.postgres,
    redis: engines.redis,
    frontDoor: frontDoor?.pid,
  });
  const total = (list: Array<{ child: { pid?: number } }>) => list.reduce((n, p) => n + of[String(p.child.pid)]!, 0);
  return {
    api: total(apis),
    pipeline: total(pipelines),
    kafka: of.kafka!,
    clickhouse: of.clickhouse!,
    ...(frontDoor ? { frontDoor: of.frontDoor! } : {}),
    postgres: of.postgres!,
    redis: of.redis!,
    benchClient: process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6,
  };
};
const cpuSince = (from: ReturnType<typeof cpuNow>, to: ReturnType<typeof cpuNow>) =>
  Object.fromEntries(Object.entries(to).map(([k, v]) => [k, round(v - (from[k as keyof typeof from] ?? 0))]));
// Messages on the events topic before the load: with its end at load end, the events per message (one request's, split past 512 KB).
const kafkaAdmin = createKafka(cfg, createLogger('bench', 'warn'), 'bench-lag').admin();
await kafkaAdmin.connect();
const eventsTopic = topicNames(cfg.KAFKA_TOPIC_PREFIX).events;
const topicEnd = async (topic = eventsTopic) => new Map((await topicOffsets(kafkaAdmin, topic)).map((o) => [o.partition, Number(o.high)]));
// What each processor reads: connector health reads only the ingest reports (one per request, as the events).
const inputOf = (processor: string) => (processor === 'health' ? derivedTopicNames(cfg.KAFKA_TOPIC_PREFIX).ingestReports : eventsTopic);
let started = performance.now();
let deadline = started + WARMUP_S * 1000;
let next = 0;
const lastPush = new Map<string, number>();

async function client(): Promise<void> {
  while (performance.now() < deadline) {
    const slot = next++;
    if (RATE > 0) {
      const wait = started + ((slot * BATCH) / RATE) * 1000 - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (performance.now() >= deadline) break;
    }
    const t = tenants[slot % tenants.length]!;
    // Each push holds what the venue's connector saw since its previous one: no two overlap in time.
    const now = Date.now();
    const payload = ingestBody(t, BATCH, NEW_DEVICES, now, lastPush.get(t.venueId));
    lastPush.set(t.venueId, now);
    const t0 = performance.now();
    const res = await fetch(`${bases[slot % bases.length]}/ingest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t.key}` },
      body: payload,
    }).catch(() => null);
    const ms = performance.now() - t0;
    if (!res) {
      failures++;
      continue;
    }
    statusCounts[res.status] = (statusCounts[res.status] ?? 0) + 1;
    const body = (await res.json()) as { accepted?: number; rejected?: number };
    if (res.status === 202) {
      latencies.push(ms);
      accepted += body.accepted ?? 0;
      rejected += body.rejected ?? 0;
    } else if (res.status === 429) {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

const probeLags: number[] = [];
let probeEvents = 0;
async function probe(): Promise<void> {
  while (performance.now() < deadline) {
    const sentAt = performance.now();
    const before = await countFor(probeOp.operator_id as string, probeVenue.id as string);
    await call('/ingest', {
      method: 'POST',
      key: probeOp.api_key as string,
      body: JSON.stringify({
        venue_id: probeVenue.id,
        connector_type: 'density',
        events: [{ type: 'entry', timestamp: new Date().toISOString(), payload: { direction: 1 } }],
      }),
    });
    probeEvents++;
    const acked = performance.now();
    while ((await countFor(probeOp.operator_id as string, probeVenue.id as string)) <= before && performance.now() - acked < 30_000)
      await new Promise((r) => setTimeout(r, POLL_QUERYABLE_MS));
    probeLags.push(performance.now() - acked);
    const wait = 1000 - (performance.now() - sentAt);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
}

// The warm-up: the same clients, then everything caught up, the derive job's round included; its
// requests and events count nowhere below.
let storedBeforeLoad = 0;
if (WARMUP_S > 0) {
  await Promise.all(Array.from({ length: CLIENTS }, client));
  await settled(chBench, kafkaAdmin, cfg.KAFKA_TOPIC_PREFIX, accepted, POLL_CAUGHT_UP_MS);
  storedBeforeLoad = await countAll();
  accepted = rejected = failures = 0;
  latencies.length = 0;
  for (const status of Object.keys(statusCounts)) delete statusCounts[Number(status)];
}
const serverBefore = await serverSideNow();

const endBeforeLoad = await topicEnd();
const cpuBefore = cpuNow();
const machineBefore = machineCpu();
started = performance.now();
deadline = started + DURATION_S * 1000;
next = 0;

// The load ends when the clients stop. The probe's last sample may still be waiting to become
// queryable then: that wait is the sink's lag, not load, and no longer counts in the elapsed time.
const probing = probe();
probing.catch(() => undefined); // rethrown by the await below, after the load's figures are taken
await Promise.all(Array.from({ length: CLIENTS }, client));
const elapsedS = (performance.now() - started) / 1000;
const loadEnded = performance.now();
const cpuAtLoadEnd = cpuNow();
const machineAtLoadEnd = machineCpu();
await probing;
let stored = 0;
while (performance.now() - loadEnded < 120_000) {
  stored = await countAll();
  if (stored >= storedBeforeLoad + accepted + probeEvents) break;
  // A count of the whole raw table: every 100 ms it cost ClickHouse 0.36 CPU-s of a default run.
  await new Promise((r) => setTimeout(r, POLL_CAUGHT_UP_MS));
}
const drainMs = performance.now() - loadEnded;
const storedAtSec = await serverNow(chBench);

// Stream processors: lag (events not yet committed by each processor's group) when the load ended,
// measured against the topic's end at that moment, and the time until each group reached it.
const endAtLoadEnd = await topicEnd();
const messagesInLoad = [...endAtLoadEnd].reduce((n, [p, end]) => n + end - (endBeforeLoad.get(p) ?? 0), 0);
const eventsPerMessage = messagesInLoad > 0 ? (accepted + probeEvents) / messagesInLoad : NaN;
const committedOf = async (groupId: string, topic: string) => {
  const [t] = await kafkaAdmin.fetchOffsets({ groupId, topics: [topic] });
  return new Map(t!.partitions.map((p) => [p.partition, Math.max(0, Number(p.offset))]));
};
const processorLag: Record<string, { lagMessagesAtLoadEnd: number; lagEventsAtLoadEnd: number; catchUpMs: number | null }> = {};
for (const name of ['occupancy', 'health']) {
  const group = `${cfg.KAFKA_TOPIC_PREFIX}.proc.${name}`;
  const input = inputOf(name);
  const endOfInput = input === eventsTopic ? endAtLoadEnd : await topicEnd(input);
  const behind = (c: Map<number, number>) => [...endOfInput].reduce((n, [p, end]) => n + Math.max(0, end - (c.get(p) ?? 0)), 0);
  const lagAtLoadEnd = behind(await committedOf(group, input));
  let catchUpMs: number | null = null;
  while (performance.now() - loadEnded < 300_000) {
    if (behind(await committedOf(group, input)) === 0) {
      catchUpMs = round(performance.now() - loadEnded, 0);
      break;
    }
    await new Promise((r) => setTimeout(r, POLL_CAUGHT_UP_MS));
  }
  processorLag[name] = { lagMessagesAtLoadEnd: lagAtLoadEnd, lagEventsAtLoadEnd: round(lagAtLoadEnd * eventsPerMessage, 0), catchUpMs };
}
// The derive job (visits, loyalty, occupancy history from the raw table): caught up once a round
// that started after the last event was stored has finished and carried nothing over.
let deriveCatchUpMs: number | null = null;
while (performance.now() - loadEnded < 300_000) {
  if (await deriveCaughtUp(chBench, 'derive', storedAtSec + 1)) {
    deriveCatchUpMs = round(performance.now() - loadEnded, 0);
    break;
  }
  await new Promise((r) => setTimeout(r, POLL_CAUGHT_UP_MS));
}
await kafkaAdmin.disconnect();
const pipelineRssMb = pipelines.reduce((n, p) => n + rssMbOf(p.child.pid), 0);
const cpuAfterCatchUp = cpuNow();

/** The api's histograms of answering POST /ingest and of Kafka acknowledging a batch (first instance), as counted so far. */
async function serverSideNow() {
  const text = await fetch(`http://127.0.0.1:${API_METRICS_PORT}/metrics`).then(
    (r) => r.text(),
    () => '',
  );
  const histogram = (name: string, labels: string) => {
    const ours = text.split('\n').filter((l) => l.startsWith(`${name}_`) && l.includes(labels));
    const buckets = ours
      .filter((l) => l.startsWith(`${name}_bucket{`))
      .map((l) => {
        const le = /le="([^"]+)"/.exec(l)?.[1];
        return { le: le === '+Inf' ? Infinity : Number(le), n: Number(l.split(' ').pop()) };
      })
      .sort((a, b) => a.le - b.le);
    const sum = Number(
      ours
        .find((l) => l.startsWith(`${name}_sum{`))
        ?.split(' ')
        .pop() ?? 0,
    );
    return { buckets, sum };
  };
  return {
    answerIngest: histogram('http_request_duration_seconds', 'route="/ingest"'),
    kafkaAcknowledge: histogram('kafka_produce_duration_seconds', 'outcome="acknowledged"'),
  };
}

/** Where the measured load's requests' time went: the histograms' counts since `before`. Quantiles are bucket upper bounds. */
function serverSideSince(before: Awaited<ReturnType<typeof serverSideNow>>, after: Awaited<ReturnType<typeof serverSideNow>>) {
  const since = (b: (typeof before)['answerIngest'], a: (typeof after)['answerIngest']) => {
    const buckets = a.buckets.map((x) => ({ le: x.le, n: x.n - (b.buckets.find((y) => y.le === x.le)?.n ?? 0) }));
    const count = buckets.at(-1)?.n ?? 0;
    const q = (p: number) => (count ? buckets.find((x) => x.n >= p * count)!.le * 1000 : NaN);
    return { count, meanMs: round(((a.sum - b.sum) / count) * 1000), p50UpToMs: q(0.5), p95UpToMs: q(0.95), p99UpToMs: q(0.99) };
  };
  return {
    answerIngest: since(before.answerIngest, after.answerIngest),
    kafkaAcknowledge: since(before.kafkaAcknowledge, after.kafkaAcknowledge),
  };
}
const server = serverSideSince(serverBefore, await serverSideNow());

await frontDoor?.stop();
for (const a of apis) await a.stop();
for (const p of pipelines) await p.stop();
await chBench.close();

latencies.sort((a, b) => a - b);
probeLags.sort((a, b) => a - b);
const eventsPerSec = accepted / elapsedS;
// The rate the whole service sustained: until the raw table held every event and every processor
// had caught up (null when one did not within the wait). The accepted rate alone counts events the
// pipeline was still behind on.
const catchUps = [...Object.values(processorLag).map((l) => l.catchUpMs), deriveCatchUpMs];
const settledS = catchUps.some((ms) => ms === null) ? null : elapsedS + Math.max(drainMs, ...(catchUps as number[])) / 1000;
const endToEndPerSec = settledS === null ? null : (accepted + probeEvents) / settledS;
// The figure that travels between machines: CPU the service spends per event, from the load's start
// until every processor and the derive job caught up. Reported apart: the bench client's own CPU,
// and the stores beside the stream (Postgres: keys, quotas, venues; Redis: rate limits), which cost
// per request rather than per event and which issue 30's system figure leaves out.
const APART = new Set(['benchClient', 'postgres', 'redis']);
const caughtUpCpu = cpuSince(cpuBefore, cpuAfterCatchUp);
const events = accepted + probeEvents;
const cpuMicrosPerEvent = Object.fromEntries(Object.entries(caughtUpCpu).map(([k, v]) => [k, round((v * 1e6) / events, 1)]));
const systemCpuMicrosPerEvent = round((Object.entries(caughtUpCpu).reduce((n, [k, v]) => (APART.has(k) ? n : n + v), 0) * 1e6) / events, 1);
const requests = latencies.length + probeEvents;
const storesCpuMicrosPerRequest = {
  postgres: round((caughtUpCpu.postgres! * 1e6) / requests, 0),
  redis: round((caughtUpCpu.redis! * 1e6) / requests, 0),
};
const result = {
  benchmark: 'ingest',
  at: new Date().toISOString(),
  machine: machine(),
  settings: {
    durationS: DURATION_S,
    warmupS: WARMUP_S,
    clients: CLIENTS,
    operators: OPERATORS,
    batchSize: BATCH,
    offeredEventsPerSec: RATE || 'unpaced',
    rateLimits: cfg.RATE_LIMITS_ENABLED,
    apiInstances: APIS,
    frontDoor: FRONT_DOOR,
    pipelineInstances: PIPELINES,
    newDeviceShare: NEW_DEVICES,
  },
  ingest: {
    acceptedEvents: accepted,
    rejectedEvents: rejected,
    requests: latencies.length,
    statusCounts,
    transportFailures: failures,
    elapsedS: round(elapsedS, 2),
    eventsPerSec: round(eventsPerSec, 0),
    endToEndEventsPerSec: endToEndPerSec === null ? null : round(endToEndPerSec, 0),
    latencyMs: {
      p50: round(percentile(latencies, 50)),
      p95: round(percentile(latencies, 95)),
      p99: round(percentile(latencies, 99)),
      max: round(latencies.at(-1) ?? NaN),
    },
    serverSide: server,
  },
  queryable: {
    storedRows: stored - storedBeforeLoad,
    allStored: stored >= storedBeforeLoad + accepted + probeEvents,
    drainAfterLoadMs: round(drainMs, 0),
    probeLagMs: {
      samples: probeLags.length,
      p50: round(percentile(probeLags, 50)),
      p95: round(percentile(probeLags, 95)),
      max: round(probeLags.at(-1) ?? NaN),
    },
  },
  processors: {
    eventsPerMessage: round(eventsPerMessage, 1),
    lag: processorLag,
    deriveCatchUpMs,
    stateEntriesAtStop: processorState,
    pipelineRssMbAfterCatchUp: pipelineRssMb,
  },
  kafkaProducerPerformance: { recordsPerSec: round(kafkaCeiling, 0), recordSizeBytes: sampleEventBytes, acks: 'all', line: perfLine },
  ratioToKafkaCeiling: round(eventsPerSec / kafkaCeiling, 3),
  endToEndRatioToKafkaCeiling: endToEndPerSec === null ? null : round(endToEndPerSec / kafkaCeiling, 3),
  cpuSecondsDuringLoad: cpuSince(cpuBefore, cpuAtLoadEnd),
  cpuStolenDuringLoadPercent: round(cpuShare(machineBefore, machineAtLoadEnd, 'steal') * 100, 0),
  cpuSecondsLoadToCaughtUp: caughtUpCpu,
  systemCpuMicrosPerEvent,
  cpuMicrosPerEvent,
  storesCpuMicrosPerRequest,
};
const path = writeResult(args.out ?? (RATE ? 'ingest-paced' : 'ingest'), result);
console.log(JSON.stringify(result, null, 2));
console.log(
  `\naccepted ${round(eventsPerSec, 0)} events/s, ${endToEndPerSec === null ? 'not settled' : `${round(endToEndPerSec, 0)} end to end`} (p50 ${result.ingest.latencyMs.p50} ms, p95 ${result.ingest.latencyMs.p95} ms, p99 ${result.ingest.latencyMs.p99} ms); ` +
    `${round((eventsPerSec / kafkaCeiling) * 100, 1)} % of Kafka's producer ceiling; ${result.cpuStolenDuringLoadPercent} % of the CPU stolen by the hypervisor during the load; queryable p50 ${result.queryable.probeLagMs.p50} ms after the 202; ` +
    `processors caught up ${Object.entries(processorLag)
      .map(([n, l]) => `${n} ${l.catchUpMs ?? 'not'} ms (lag ${l.lagEventsAtLoadEnd} events)`)
      .join(', ')}, derive ${deriveCatchUpMs ?? 'not'} ms, pipeline RSS ${pipelineRssMb} MB; ` +
    `system CPU ${systemCpuMicrosPerEvent} µs/event (${Object.entries(cpuMicrosPerEvent)
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ', ',
      )}); Postgres ${storesCpuMicrosPerRequest.postgres} µs and Redis ${storesCpuMicrosPerRequest.redis} µs per request; written to ${path}`,
);
process.exit(0);
