/**
 * `npm run bench:fairness`: does one tenant running the heaviest allowed reads slow down everyone
 * else? A real api and pipeline on the run's own databases and topics. A "light" tenant does a
 * steady loop of light requests (its venue list, its live occupancy, a 24 h chart of one key) and a
 * steady ingest stream goes in from several operators. Phase 1 (idle): that alone. Phase 2
 * (contended): the same while a "heavy" tenant asks, from several connections and as fast as its
 * limits let it, for every telemetry key over 14 days at 1 minute (the point cap per key) over REST
 * and as MCP `get_telemetry`, single calls and JSON-RPC batches of ten. Reports the light
 * tenant's and the ingest stream's latency in both phases, the api's RSS and every process's CPU,
 * and the heavy tenant's answers by status and bytes.
 *
 * The heavy tenant runs in a worker thread, so reading its large answers does not delay the
 * event loop that times the light requests.
 */
import { createClient } from '@clickhouse/client';
import http from 'node:http';
import { loadavg } from 'node:os';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { chRows, chsql, createCh } from '../clickhouse/client.js';
import { topicNames } from '../lib/topology.js';
import { TELEMETRY_KEYS } from '../lib/events/vocabulary.js';
import { createLogger } from '../lib/logger.js';
import { repoPath } from '../lib/paths.js';
import { compactClosedPartitions } from '../pipeline/compaction.js';
import { createHousekeepingCh } from '../pipeline/housekeeping.js';
import { PLAN_LIMITS } from '../domain/tenants/plans.js';
import { ingestBody, randomMac, type BenchVenue } from './lib/requests.js';
import { enginePorts, engineProcesses, pidsListeningOn } from './lib/engines.js';
import { seedEventsSql, seedOccupancyUpdatesSql, type SeedVenue } from './lib/seed.js';
import {
  benchConfig,
  cpuSecondsOf,
  cpuShare,
  dropEarlierRunTopics,
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
import { cliArgs } from '../lib/cli.js';

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
const API_PORT = 3193;
const API_METRICS_PORT = 3293;

// --- a request on one keep-alive connection, its answer read and counted, not kept ---

interface Answer {
  status: number | 'timeout' | 'error' | 'aborted';
  ms: number;
  bytes: number;
  /** MCP: tool results with isError: true, and JSON-RPC error objects, in the answer. */
  toolErrors: number;
  rpcErrors: number;
  /** The answer's first 600 characters (for the report's samples). */
  head: string;
  /** Retry-After of the answer, seconds (0 without one). */
  retryAfter: number;
}

const IS_ERROR = Buffer.from('"isError":true');
const RPC_ERROR = Buffer.from('"error":{"code"');
const countIn = (buf: Buffer, needle: Buffer) => {
  let n = 0;
  for (let i = buf.indexOf(needle); i !== -1; i = buf.indexOf(needle, i + needle.length)) n++;
  return n;
};

function send(
  agent: http.Agent,
  method: 'GET' | 'POST',
  path: string,
  headers: Record<string, string>,
  body: string | undefined,
  opts: { timeoutMs: number; scan?: boolean; signal?: AbortSignal },
): Promise<Answer> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let bytes = 0;
    let toolErrors = 0;
    let rpcErrors = 0;
    let head = '';
    let carry = Buffer.alloc(0);
    let settled = false;
    let retryAfter = 0;
    const done = (status: Answer['status']) => {
      if (settled) return;
      settled = true;
      resolve({ status, ms: performance.now() - t0, bytes, toolErrors, rpcErrors, head, retryAfter });
    };
    const req = http.request(
      {
        host: '127.0.0.1',
        port: API_PORT,
        method,
        path,
        agent,
        headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        signal: opts.signal,
      },
      (res) => {
        retryAfter = Number(res.headers['retry-after'] ?? 0) || 0;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (head.length < 600) head += chunk.subarray(0, 600 - head.length).toString();
          if (opts.scan) {
            // A marker split over two chunks is found in the carried tail.
            const scanned = carry.length ? Buffer.concat([carry, chunk]) : chunk;
            toolErrors += countIn(scanned, IS_ERROR);
            rpcErrors += countIn(scanned, RPC_ERROR);
            carry = Buffer.from(scanned.subarray(Math.max(0, scanned.length - (RPC_ERROR.length - 1))));
          }
        });
        res.on('end', () => done(res.statusCode ?? 0));
        res.on('error', () => done(opts.signal?.aborted ? 'aborted' : 'error'));
      },
    );
    req.setTimeout(opts.timeoutMs, () => {
      done('timeout');
      req.destroy();
    });
    req.on('error', () => done(opts.signal?.aborted ? 'aborted' : 'error'));
    req.end(body);
  });
}

const stats = (samples: number[]) => {
  const s = [...samples].sort((a, b) => a - b);
  return {
    n: s.length,
    p50: round(percentile(s, 50)),
    p95: round(percentile(s, 95)),
    p99: round(percentile(s, 99)),
    max: round(s.at(-1) ?? NaN),
  };
};

// --- the heavy tenant (worker thread) ---

interface HeavyPlan {
  key: string;
  restPath: string;
  mcpArguments: Record<string, unknown>;
  rest: number;
  mcp: number;
  batches: number;
  batchSize: number;
  seconds: number;
  timeoutMs: number;
  /** Back off a 429/503 for its Retry-After, as the spec tells a client to (false: hammer on). */
  honourRetryAfter: boolean;
}
type HeavyKind = 'rest' | 'mcp' | 'mcpBatch';
interface HeavyKindResult {
  connections: number;
  requests: number;
  statuses: Record<string, number>;
  bytes: number;
  /** Tool calls sent in answered (200) MCP requests, and how many of them came back as tool errors / JSON-RPC errors. */
  toolCalls: number;
  toolErrors: number;
  rpcErrors: number;
  okMs: ReturnType<typeof stats>;
  refusedMs: ReturnType<typeof stats>;
  /** First answer of each status (its first 600 characters). */
  samples: Record<string, string>;
}

async function heavyWorker(plan: HeavyPlan): Promise<Record<HeavyKind, HeavyKindResult>> {
  const controller = new AbortController();
  const deadline = performance.now() + plan.seconds * 1000;
  const timer = setTimeout(() => controller.abort(), plan.seconds * 1000);
  const auth = { authorization: `Bearer ${plan.key}` };
  const mcpHeaders = {
    ...auth,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-03-26',
  };
  let id = 0;
  const call = () => ({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name: 'get_telemetry', arguments: plan.mcpArguments } });
  const acc = (connections: number) => ({ connections, answers: [] as Answer[], toolCalls: 0 });
  const runs = { rest: acc(plan.rest), mcp: acc(plan.mcp), mcpBatch: acc(plan.batches) };

  async function loop(kind: HeavyKind): Promise<void> {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    while (performance.now() < deadline) {
      let answer: Answer;
      let calls = 0;
      if (kind === 'rest') {
        answer = await send(agent, 'GET', plan.restPath, auth, undefined, { timeoutMs: plan.timeoutMs, signal: controller.signal });
      } else {
        calls = kind === 'mcp' ? 1 : plan.batchSize;
        const body = JSON.stringify(kind === 'mcp' ? call() : Array.from({ length: calls }, call));
        answer = await send(agent, 'POST', '/mcp', mcpHeaders, body, { timeoutMs: plan.timeoutMs, scan: true, signal: controller.signal });
      }
      runs[kind].answers.push(answer);
      if (answer.status === 200) runs[kind].toolCalls += calls;
      // A spec-following client waits out a refusal's Retry-After; a broken connection gets a short pause.
      const wait =
        (answer.status === 429 || answer.status === 503) && plan.honourRetryAfter
          ? answer.retryAfter * 1000
          : answer.status === 'error'
            ? 50
            : 0;
      if (wait > 0) await new Promise((r) => setTimeout(r, Math.min(wait, Math.max(0, deadline - performance.now()))));
    }
    agent.destroy();
  }
  await Promise.all(
    (['rest', 'mcp', 'mcpBatch'] as const).flatMap((kind) => Array.from({ length: runs[kind].connections }, () => loop(kind))),
  );
  clearTimeout(timer);
  const summary = (kind: HeavyKind): HeavyKindResult => {
    const { answers, connections, toolCalls } = runs[kind];
    const statuses: Record<string, number> = {};
    const samples: Record<string, string> = {};
    for (const a of answers) {
      statuses[a.status] = (statuses[a.status] ?? 0) + 1;
      if (!(a.status in samples)) samples[a.status] = a.head;
    }
    const ok = answers.filter((a) => typeof a.status === 'number' && a.status < 300);
    return {
      connections,
      requests: answers.length,
      statuses,
      bytes: answers.reduce((n, a) => n + a.bytes, 0),
      toolCalls,
      toolErrors: answers.reduce((n, a) => n + a.toolErrors, 0),
      rpcErrors: answers.reduce((n, a) => n + a.rpcErrors, 0),
      okMs: stats(ok.map((a) => a.ms)),
      refusedMs: stats(answers.filter((a) => a.status === 429 || a.status === 503).map((a) => a.ms)),
      samples,
    };
  };
  return { rest: summary('rest'), mcp: summary('mcp'), mcpBatch: summary('mcpBatch') };
}

if (!isMainThread) {
  parentPort!.postMessage(await heavyWorker(workerData as HeavyPlan));
} else {
  await main();
}

// --- the benchmark ---

async function main(): Promise<void> {
  const { values: args } = cliArgs(
    'npm run bench:fairness --',
    "One tenant's expensive reads beside another's light traffic: the light tenant's latency and the api's memory (benchmarks/README.md).",
    {
      options: {
        seconds: { type: 'string', default: '60' },
        'idle-seconds': { type: 'string' },
        'heavy-rest': { type: 'string', default: '4' },
        'heavy-mcp': { type: 'string', default: '1' },
        'heavy-batch': { type: 'string', default: '1' },
        'batch-size': { type: 'string', default: '10' },
        'heavy-days': { type: 'string', default: '14' },
        'heavy-events': { type: 'string', default: '1000000' },
        'light-rate': { type: 'string', default: '4' },
        'ingest-rate': { type: 'string', default: '20' },
        'ingest-batch': { type: 'string', default: '50' },
        'ingest-operators': { type: 'string', default: '14' },
        warmup: { type: 'string', default: '15' },
        'no-align': { type: 'boolean', default: false },
        'ignore-retry-after': { type: 'boolean', default: false },
        'mcp-keys': { type: 'string', default: 'temperature' },
        out: { type: 'string', default: 'fairness' },
      },
    },
  );
  /** The contended phase; the idle phase is half as long unless given (30 s by default). */
  const CONTENDED_S = Number(args.seconds);
  const IDLE_S = Number(args['idle-seconds'] ?? CONTENDED_S / 2);
  const HEAVY_REST = Number(args['heavy-rest']);
  const HEAVY_MCP = Number(args['heavy-mcp']);
  const HEAVY_BATCH = Number(args['heavy-batch']);
  const BATCH_SIZE = Number(args['batch-size']);
  const HEAVY_DAYS = Number(args['heavy-days']);
  const HEAVY_EVENTS = Number(args['heavy-events']);
  /** Requests a second of each light kind (one connection each). */
  const LIGHT_RATE = Number(args['light-rate']);
  const INGEST_RATE = Number(args['ingest-rate']);
  const INGEST_BATCH = Number(args['ingest-batch']);
  /** Each may send 100 ingest requests a minute: the stream is spread over enough of them to stay under. */
  const INGEST_OPERATORS = Number(args['ingest-operators']);
  /** Light requests and ingest, not measured, before the idle phase: JIT, connections, the new topics, the pipeline's first rounds. */
  const WARMUP_S = Number(args.warmup);
  const ALIGN = !args['no-align'];
  const OUT = args.out!;
  const DB = 'venue_bench_fairness';
  const LIGHT_EVENTS = 100_000;
  const LIGHT_DAYS = 2;

  const loadAtStart = loadavg().map((n) => round(n, 2));
  // The engines are started (or found running) as for every benchmark. When all four already listen
  // on their configured ports they are used as they are, whichever checkout started them (a git
  // worktree of older code measures against the same engines: its own `up` would refuse their ports).
  const enginesListening = (() => {
    try {
      return Object.values(pidsListeningOn(enginePorts(benchConfig({}).cfg))).every((pid) => pid !== undefined);
    } catch {
      return false;
    }
  })();
  if (!enginesListening) {
    const { up } = (await import(repoPath('scripts', 'stack.mjs'))) as { up: (o: { quiet: boolean }) => Promise<unknown> };
    await up({ quiet: true });
  }

  const runId = Date.now().toString(36);
  const { cfg: baseCfg } = benchConfig({});
  const dbUrl = new URL(baseCfg.DATABASE_URL);
  dbUrl.pathname = `/${DB}`;
  const { cfg, env } = benchConfig({
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATABASE_URL: dbUrl.toString(),
    CLICKHOUSE_DATABASE: DB,
    KAFKA_TOPIC_PREFIX: `fairness.${runId}`,
    REDIS_KEY_PREFIX: `fairness.${runId}:`,
    API_PORT: String(API_PORT),
    API_METRICS_PORT: String(API_METRICS_PORT),
    PIPELINE_METRICS_PORT: '0',
  });
  if (!cfg.RATE_LIMITS_ENABLED) throw new Error('RATE_LIMITS_ENABLED is off in the environment: the heavy tenant would not be limited');
  console.log(
    `bench:fairness  idle ${IDLE_S} s, contended ${CONTENDED_S} s; heavy: ${HEAVY_REST} REST + ${HEAVY_MCP} MCP + ${HEAVY_BATCH} MCP-batch (×${BATCH_SIZE}) connections, ` +
      `${TELEMETRY_KEYS.length} keys × ${HEAVY_DAYS} days at 1 minute; light: ${LIGHT_RATE}/s per kind; ingest ${INGEST_RATE}/s × ${INGEST_BATCH} events over ${INGEST_OPERATORS} operators; load average ${loadAtStart.join(' ')}`,
  );

  await freshDatabases(baseCfg.DATABASE_URL, cfg, DB);
  await dropEarlierRunTopics(cfg.KAFKA_BROKERS, 'fairness', cfg.KAFKA_TOPIC_PREFIX);

  const api = startProcess('api', 'dist/apps/api/main.js', env);
  const pipelines = startPipelines(1, env);
  process.once('exit', () => {
    api.child.kill();
    for (const p of pipelines) p.child.kill();
  });
  const base = `http://127.0.0.1:${API_PORT}`;
  await waitFor('api', async () => (await fetch(`${base}/health`)).ok);

  async function call(path: string, init: RequestInit & { key?: string; admin?: boolean } = {}): Promise<Record<string, unknown>> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (init.key) headers.authorization = `Bearer ${init.key}`;
    if (init.admin) headers['x-admin-key'] = cfg.ADMIN_SECRET;
    const res = await fetch(base + path, { ...init, headers });
    const body = (await res.json()) as Record<string, unknown>;
    if (res.status >= 300) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
    return body;
  }
  async function tenant(name: string, i: number, plan: 'pro' | 'enterprise', timezone: string, capacity: number) {
    const op = await call('/api/operators', {
      method: 'POST',
      admin: true,
      body: JSON.stringify({ name, email: `fairness${i}@example.com`, plan: 'pro' }),
    });
    const operatorId = op.operator_id as string;
    const key = op.api_key as string;
    if (plan === 'enterprise')
      await call(`/api/operators/${operatorId}/plan`, { method: 'PUT', admin: true, body: JSON.stringify({ plan: 'enterprise' }) });
    const venue = await call('/api/venues', { method: 'POST', key, body: JSON.stringify({ name: `${name} venue`, timezone }) });
    const zone = async (slug: string, type: string) =>
      (await call(`/api/venues/${venue.id}/zones`, { method: 'POST', key, body: JSON.stringify({ slug, name: slug, type, capacity }) }))
        .id as string;
    const seed: SeedVenue = {
      id: venue.id as string,
      operatorId,
      timezone,
      capacity,
      retentionDays: PLAN_LIMITS[plan].retentionDays,
      zones: { hall: await zone('hall', 'area'), entrance: await zone('main-entrance', 'entrance') },
    };
    return { key, seed };
  }
  // Heavy on Enterprise: no monthly quota of API calls or MCP queries, only the per-minute rate limit.
  const heavy = await tenant('fairness heavy', 0, 'enterprise', 'Europe/Berlin', 800);
  const light = await tenant('fairness light', 1, 'pro', 'Europe/Berlin', 150);
  // The light tenant's venue takes part in the ingest stream (Density: its live occupancy moves).
  const ingestTenants: Array<BenchVenue & { key: string }> = [{ key: light.key, venueId: light.seed.id, connector: 'density', pool: [] }];
  for (let i = 1; i < INGEST_OPERATORS; i++) {
    const op = await call('/api/operators', {
      method: 'POST',
      admin: true,
      body: JSON.stringify({ name: `fairness ingest ${i}`, email: `fairness-ingest${i}@example.com`, plan: 'pro' }),
    });
    const venue = await call('/api/venues', {
      method: 'POST',
      key: op.api_key as string,
      body: JSON.stringify({ name: `Ingest ${i}`, timezone: 'Europe/Berlin' }),
    });
    const connector = i % 2 === 0 ? 'density' : 'meraki';
    ingestTenants.push({
      key: op.api_key as string,
      venueId: venue.id as string,
      connector,
      pool: connector === 'meraki' ? Array.from({ length: 500 }, randomMac) : [],
    });
  }

  // --- seed: 14 days of minute data for the heavy venue, 2 days for the light one ---
  const loader = createClient({
    url: cfg.CLICKHOUSE_URL,
    username: cfg.CLICKHOUSE_USER,
    password: cfg.CLICKHOUSE_PASSWORD,
    request_timeout: 120_000,
  });
  const topic = topicNames(cfg.KAFKA_TOPIC_PREFIX).events;
  const endMs = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS;
  const seedStarted = performance.now();
  for (const [v, total, days] of [
    [heavy.seed, HEAVY_EVENTS, HEAVY_DAYS],
    [light.seed, LIGHT_EVENTS, LIGHT_DAYS],
  ] as const) {
    const spanSec = days * 86_400;
    const chunk = 1_000_000;
    for (let off = 0; off < total; off += chunk) {
      await loader.command({
        query: seedEventsSql(DB, topic, v, 0, total, off, Math.min(chunk, total - off), endMs / 1000 - spanSec, spanSec).text,
      });
    }
    await loader.command({ query: seedOccupancyUpdatesSql(DB, v).text });
  }
  const ch = createCh(cfg);
  const mergesLeft = async () =>
    Number((await chRows<{ n: string }>(ch, chsql`SELECT count() AS n FROM system.merges WHERE database = ${DB}`))[0]?.n ?? 0);
  for (let quiet = 0, t0 = performance.now(); quiet < 3 && performance.now() - t0 < 180_000;) {
    quiet = (await mergesLeft()) === 0 ? quiet + 1 : 0;
    await new Promise((r) => setTimeout(r, 1000));
  }
  // What the pipeline's hourly housekeeping does to closed days (see bench:query).
  const compactLog = createLogger('bench', 'warn');
  const compactCh = createHousekeepingCh(cfg, compactLog, DB);
  await compactClosedPartitions(compactCh, compactLog, { limit: Infinity });
  await compactCh.close();
  await loader.close();
  const seedSeconds = round((performance.now() - seedStarted) / 1000);
  console.log(
    `seeded ${HEAVY_EVENTS} events over ${HEAVY_DAYS} days (heavy) and ${LIGHT_EVENTS} over ${LIGHT_DAYS} days (light) in ${seedSeconds} s`,
  );

  // --- the requests ---
  const heavyStart = endMs - HEAVY_DAYS * DAY_MS;
  const allKeys = TELEMETRY_KEYS.join(',');
  const heavyRestPath = `/api/venues/${heavy.seed.id}/telemetry?keys=${allKeys}&startTs=${heavyStart}&endTs=${endMs}&interval=${MINUTE_MS}`;
  // The heaviest MCP call the tool result cap lets through: one key, every minute of the range
  // (all eight keys are refused before any query, as over the cap).
  const mcpArguments = { venue_id: heavy.seed.id, keys: args['mcp-keys']!, startTs: heavyStart, endTs: endMs, interval: MINUTE_MS };
  const chartEnd = Math.ceil(Date.now() / HOUR_MS) * HOUR_MS;
  const LIGHT_KINDS = {
    venues: '/api/venues',
    occupancy: `/api/venues/${light.seed.id}/occupancy`,
    chart24h: `/api/venues/${light.seed.id}/telemetry?keys=occupancy&startTs=${chartEnd - DAY_MS}&endTs=${chartEnd}&interval=${HOUR_MS}`,
  } as const;
  type LightKind = keyof typeof LIGHT_KINDS;
  const lightAuth = { authorization: `Bearer ${light.key}` };

  // Checks (and warms) every request once before timing.
  const checkAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (const [kind, path] of Object.entries(LIGHT_KINDS)) {
    const a = await send(checkAgent, 'GET', path, lightAuth, undefined, { timeoutMs: 30_000 });
    if (a.status !== 200) throw new Error(`light ${kind}: ${a.status} ${a.head}`);
  }
  const heavyAuth = { authorization: `Bearer ${heavy.key}` };
  const restCheck = await send(checkAgent, 'GET', heavyRestPath, heavyAuth, undefined, { timeoutMs: 120_000 });
  if (restCheck.status !== 200) throw new Error(`heavy REST: ${restCheck.status} ${restCheck.head}`);
  const mcpHeaders = {
    ...heavyAuth,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-03-26',
  };
  const mcpCheck = await send(
    checkAgent,
    'POST',
    '/mcp',
    mcpHeaders,
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_telemetry', arguments: mcpArguments } }),
    { timeoutMs: 120_000, scan: true },
  );
  if (mcpCheck.status !== 200) throw new Error(`heavy MCP: ${mcpCheck.status} ${mcpCheck.head}`);
  checkAgent.destroy();
  const heavyCheck = {
    restBytes: restCheck.bytes,
    restMs: round(restCheck.ms),
    mcpBytes: mcpCheck.bytes,
    mcpMs: round(mcpCheck.ms),
    mcpToolError: mcpCheck.toolErrors > 0,
    mcpHead: mcpCheck.toolErrors > 0 ? mcpCheck.head : mcpCheck.head.slice(0, 120),
  };
  console.log(
    `heavy request alone: REST ${round(restCheck.bytes / 1e6, 2)} MB in ${round(restCheck.ms)} ms; MCP get_telemetry ${round(mcpCheck.bytes / 1e6, 2)} MB in ${round(mcpCheck.ms)} ms` +
      (mcpCheck.toolErrors ? ` (a tool error: ${mcpCheck.head.slice(0, 200)})` : ''),
  );

  // --- samplers ---
  const apiPid = api.child.pid;
  const engines = engineProcesses(cfg);
  const cpuNow = () => {
    const of = cpuSecondsOf({
      api: apiPid,
      pipeline: pipelines[0]!.child.pid,
      clickhouse: engines.clickhouse,
      kafka: engines.kafka,
      postgres: engines.postgres,
      redis: engines.redis,
    });
    const own = process.cpuUsage();
    return { ...of, benchClient: (own.user + own.system) / 1e6 };
  };
  let phase: 'warmup' | 'idle' | 'contended' | 'between' = 'between';
  const rss: Array<{ t: number; phase: string; mb: number }> = [];
  const rssStarted = performance.now();
  const rssTimer = setInterval(() => rss.push({ t: round((performance.now() - rssStarted) / 1000), phase, mb: rssMbOf(apiPid) }), 1000);

  async function runPhase(name: 'warmup' | 'idle' | 'contended', seconds: number) {
    const loadAvg = loadavg().map((n) => round(n, 2));
    const cpu0 = cpuNow();
    const machine0 = machineCpu();
    const started = performance.now();
    const deadline = started + seconds * 1000;
    phase = name;
    const rateWindowSecond = round((Date.now() % MINUTE_MS) / 1000);
    let worker: Promise<Record<HeavyKind, HeavyKindResult>> | undefined;
    if (name === 'contended') {
      const plan: HeavyPlan = {
        key: heavy.key,
        restPath: heavyRestPath,
        mcpArguments,
        rest: HEAVY_REST,
        mcp: HEAVY_MCP,
        batches: HEAVY_BATCH,
        batchSize: BATCH_SIZE,
        seconds,
        timeoutMs: 120_000,
        honourRetryAfter: !args['ignore-retry-after'],
      };
      const w = new Worker(new URL(import.meta.url), { workerData: plan });
      worker = new Promise((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      });
    }
    const light: Record<LightKind, { ms: number[]; statuses: Record<string, number> }> = {
      venues: { ms: [], statuses: {} },
      occupancy: { ms: [], statuses: {} },
      chart24h: { ms: [], statuses: {} },
    };
    // Each light kind on its own connection, at LIGHT_RATE a second; one that falls behind its schedule sends the next at once.
    const lightLoop = async (kind: LightKind) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; ; i++) {
        const at = started + (i * 1000) / LIGHT_RATE;
        if (at >= deadline) break;
        const wait = at - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const a = await send(agent, 'GET', LIGHT_KINDS[kind], lightAuth, undefined, { timeoutMs: 30_000 });
        light[kind].statuses[a.status] = (light[kind].statuses[a.status] ?? 0) + 1;
        if (a.status === 200) light[kind].ms.push(a.ms);
      }
      agent.destroy();
    };
    // The ingest stream: open loop, INGEST_RATE requests a second whatever the answers, round robin over the operators.
    const ingest = { ms: [] as number[], statuses: {} as Record<string, number>, events: 0 };
    const ingestAgent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    const lastPush = new Map<string, number>();
    const ingestLoop = async () => {
      const inFlight: Array<Promise<void>> = [];
      for (let i = 0; ; i++) {
        const at = started + (i * 1000) / INGEST_RATE;
        if (at >= deadline) break;
        const wait = at - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const t = ingestTenants[i % ingestTenants.length]!;
        const now = Date.now();
        const body = ingestBody(t, INGEST_BATCH, 0.1, now, lastPush.get(t.venueId));
        lastPush.set(t.venueId, now);
        inFlight.push(
          send(ingestAgent, 'POST', '/ingest', { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' }, body, {
            timeoutMs: 30_000,
          }).then((a) => {
            ingest.statuses[a.status] = (ingest.statuses[a.status] ?? 0) + 1;
            if (a.status === 202) {
              ingest.ms.push(a.ms);
              ingest.events += INGEST_BATCH;
            }
          }),
        );
      }
      await Promise.all(inFlight);
    };
    await Promise.all([...(Object.keys(LIGHT_KINDS) as LightKind[]).map(lightLoop), ingestLoop()]);
    const lightEnded = performance.now();
    const heavyResult = worker ? await worker : undefined;
    ingestAgent.destroy();
    const elapsedS = (performance.now() - started) / 1000;
    const cpu1 = cpuNow();
    const machine1 = machineCpu();
    phase = 'between';
    const phaseRss = rss.filter((r) => r.phase === name).map((r) => r.mb);
    return {
      seconds,
      elapsedS: round(elapsedS, 2),
      lightEndedAfterS: round((lightEnded - started) / 1000, 2),
      loadAverageAtStart: loadAvg,
      secondOfRateWindowAtStart: rateWindowSecond,
      light: Object.fromEntries(Object.entries(light).map(([k, v]) => [k, { ...stats(v.ms), statuses: v.statuses }])) as Record<
        LightKind,
        ReturnType<typeof stats> & { statuses: Record<string, number> }
      >,
      ingest: { ...stats(ingest.ms), statuses: ingest.statuses, events: ingest.events, eventsPerSec: round(ingest.events / elapsedS, 0) },
      apiRssMb: { max: Math.max(...phaseRss), atEnd: phaseRss.at(-1) ?? NaN, atStart: phaseRss[0] ?? NaN },
      cpuSeconds: Object.fromEntries(Object.entries(cpu1).map(([k, v]) => [k, round(v - cpu0[k as keyof typeof cpu0]!, 1)])),
      machineBusyPercent: round(cpuShare(machine0, machine1, 'busy') * 100, 0),
      machineStolenPercent: round(cpuShare(machine0, machine1, 'steal') * 100, 0),
      heavy: heavyResult ?? null,
    };
  }

  // The contended phase starts on a minute boundary when aligned, so the heavy tenant's rate-limit
  // window (fixed minutes) is the same in every run: the idle phase starts IDLE_S before it, and the
  // warm-up (at least WARMUP_S) fills the time until then.
  const idleAt = ALIGN
    ? Math.ceil((Date.now() + (WARMUP_S + IDLE_S) * 1000) / MINUTE_MS) * MINUTE_MS - IDLE_S * 1000
    : Date.now() + WARMUP_S * 1000;
  const warmupS = round((idleAt - Date.now()) / 1000, 1);
  console.log(
    `warm-up (light + ingest, not measured) for ${warmupS} s${ALIGN ? ', so that the contended phase starts on a minute boundary' : ''}`,
  );
  const warmup = warmupS > 0 ? await runPhase('warmup', warmupS) : null;
  console.log(`phase 1: idle (light + ingest) for ${IDLE_S} s`);
  const idle = await runPhase('idle', IDLE_S);
  console.log(`phase 2: contended (light + ingest + heavy) for ${CONTENDED_S} s`);
  const contended = await runPhase('contended', CONTENDED_S);
  // A few seconds after: the api's memory once the heavy answers are gone.
  await new Promise((r) => setTimeout(r, 5000));
  clearInterval(rssTimer);
  const rssAfter = rssMbOf(apiPid);

  await api.stop();
  for (const p of pipelines) await p.stop();
  await ch.close();

  const ratio = (kind: LightKind | 'ingest', p: 'p95' | 'p99') => {
    const a = kind === 'ingest' ? idle.ingest[p] : idle.light[kind][p];
    const b = kind === 'ingest' ? contended.ingest[p] : contended.light[kind][p];
    return round(b / a, 2);
  };
  const kinds = Object.keys(LIGHT_KINDS) as LightKind[];
  const p95Ratios = Object.fromEntries(kinds.map((k) => [k, ratio(k, 'p95')])) as Record<LightKind, number>;
  const GOAL = 2;
  const result = {
    benchmark: 'fairness',
    at: new Date().toISOString(),
    machine: machine(),
    loadAverageAtStart: loadAtStart,
    settings: {
      idleSeconds: IDLE_S,
      contendedSeconds: CONTENDED_S,
      heavy: {
        restConnections: HEAVY_REST,
        mcpConnections: HEAVY_MCP,
        mcpBatchConnections: HEAVY_BATCH,
        batchSize: BATCH_SIZE,
        keys: TELEMETRY_KEYS,
        mcpKeys: args['mcp-keys'],
        honoursRetryAfter: !args['ignore-retry-after'],
        days: HEAVY_DAYS,
        intervalMs: MINUTE_MS,
        plan: 'enterprise',
        mcpProtocolVersion: '2025-03-26',
      },
      light: { ratePerKindPerSec: LIGHT_RATE, requests: LIGHT_KINDS, plan: 'pro' },
      ingest: { requestsPerSec: INGEST_RATE, eventsPerRequest: INGEST_BATCH, operators: INGEST_OPERATORS },
      rateLimits: { apiPerOperatorPerMinute: 1000, ingestPerOperatorPerMinute: 100 },
      alignedToMinute: ALIGN,
    },
    data: {
      database: DB,
      heavyEvents: HEAVY_EVENTS,
      heavyDays: HEAVY_DAYS,
      lightEvents: LIGHT_EVENTS,
      lightDays: LIGHT_DAYS,
      seedSeconds,
      range: { startTs: heavyStart, endTs: endMs },
    },
    heavyRequestAlone: heavyCheck,
    warmup: warmup && { seconds: warmupS, machineBusyPercent: warmup.machineBusyPercent, light: warmup.light, ingest: warmup.ingest },
    idle,
    contended,
    apiRssMbAfter: rssAfter,
    apiRssSeries: rss,
    comparison: {
      lightP95ContendedOverIdle: p95Ratios,
      lightP99ContendedOverIdle: Object.fromEntries(kinds.map((k) => [k, ratio(k, 'p99')])),
      ingestP99Ms: { idle: idle.ingest.p99, contended: contended.ingest.p99, ratio: ratio('ingest', 'p99') },
      goal: `light p95 contended / idle ≤ ${GOAL}`,
      goalMet: kinds.every((k) => p95Ratios[k] <= GOAL),
    },
  };
  const path = writeResult(OUT, result);

  // --- the table ---
  const pad = (s: unknown, n: number) => String(s).padStart(n);
  const row = (s: { p50: number; p95: number; p99: number; n: number }) =>
    `${pad(s.p50, 7)} ${pad(s.p95, 7)} ${pad(s.p99, 7)} ${pad(s.n, 5)}`;
  console.log(
    `\n${'request (ms)'.padEnd(14)} ${'idle p50'.padStart(7)} ${'p95'.padStart(7)} ${'p99'.padStart(7)} ${'n'.padStart(5)} | ${'busy p50'.padStart(7)} ${'p95'.padStart(7)} ${'p99'.padStart(7)} ${'n'.padStart(5)} | p95 ×`,
  );
  for (const k of kinds)
    console.log(
      `${k.padEnd(14)} ${row(idle.light[k])} | ${row(contended.light[k])} | ${pad(p95Ratios[k], 5)}${p95Ratios[k] > GOAL ? '  > goal' : ''}`,
    );
  console.log(`${'ingest'.padEnd(14)} ${row(idle.ingest)} | ${row(contended.ingest)} | ${pad(ratio('ingest', 'p95'), 5)}`);
  const badLight = (p: typeof idle) =>
    kinds
      .filter((k) => Object.keys(p.light[k].statuses).some((s) => s !== '200'))
      .map((k) => `${k} ${JSON.stringify(p.light[k].statuses)}`);
  for (const [n, p] of [
    ['idle', idle],
    ['contended', contended],
  ] as const) {
    const bad = badLight(p);
    if (bad.length || Object.keys(p.ingest.statuses).some((s) => s !== '202'))
      console.log(`${n}: non-2xx answers: ${bad.join('; ')} ingest ${JSON.stringify(p.ingest.statuses)}`);
  }
  console.log(
    `\napi RSS MB: idle max ${idle.apiRssMb.max} / end ${idle.apiRssMb.atEnd}; contended max ${contended.apiRssMb.max} / end ${contended.apiRssMb.atEnd}; 5 s after ${rssAfter}`,
  );
  console.log(`CPU s idle (${IDLE_S} s, machine ${idle.machineBusyPercent} % busy): ${JSON.stringify(idle.cpuSeconds)}`);
  console.log(
    `CPU s contended (${CONTENDED_S} s, machine ${contended.machineBusyPercent} % busy): ${JSON.stringify(contended.cpuSeconds)}`,
  );
  for (const [k, h] of Object.entries(contended.heavy ?? {})) {
    console.log(
      `heavy ${k.padEnd(8)} ${h.connections} conn: ${h.requests} requests ${JSON.stringify(h.statuses)}, ${round(h.bytes / 1e6, 1)} MB received` +
        (k === 'rest' ? '' : `, ${h.toolCalls} tool calls answered (${h.toolErrors} tool errors, ${h.rpcErrors} JSON-RPC errors)`) +
        `; 2xx p50 ${h.okMs.p50} / p95 ${h.okMs.p95} ms`,
    );
  }
  console.log(
    `\nlight p95 contended / idle ${kinds.map((k) => `${k} ${p95Ratios[k]}×`).join(', ')} (goal ≤ ${GOAL}×: ${result.comparison.goalMet ? 'met' : 'NOT met'}); ingest p99 ${idle.ingest.p99} → ${contended.ingest.p99} ms; written to ${path}`,
  );
  process.exit(0);
}
