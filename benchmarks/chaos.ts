/**
 * `npm run chaos`: a fleet of ingest clients (Idempotency-Key per batch, event ids, every refusal
 * resent until a 202) runs while, in turn, the pipeline is killed with -9 three times, one of two api
 * instances is killed with -9, and the Kafka broker, ClickHouse, Postgres and Redis are each stopped
 * and started again. After each fault: every accepted event is in the raw table exactly once, the
 * `events` rollup equals the raw table, the occupancy processor's figure per venue equals the one
 * recomputed from the accepted events, every refusal was a 503 (or a 409 in flight) with Retry-After,
 * nothing hung past the client timeout, and everything recovered without a hand on it (the runner
 * only plays the supervisor that restarts a killed process, as systemd or Kubernetes would).
 *
 * Flags: --events (total, default 1,000,000), --clients, --batch, --outage-scale (1 = the full
 * outages: Kafka 30 s, ClickHouse 60 s, Postgres 30 s, Redis 30 s), --faults (comma list), --rate
 * (offered events/s; 0 = as fast as the api answers).
 * Results: benchmarks/results/chaos.json. Never run it while others use the shared stack: it stops
 * the engines.
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createDb } from '../postgres/client.js';
import { migratePostgres } from '../postgres/migrate.js';
import { createCh } from '../clickhouse/client.js';
import { migrateClickhouse, serverExecutor } from '../clickhouse/migrate.js';
import { repoPath } from '../lib/paths.js';
import { benchConfig, machine, round, startProcess, waitFor, writeResult } from './lib/harness.js';
import { Fleet, settle, type FleetTenant } from './lib/fleet.js';

const ALL_FAULTS = ['pipeline-kill', 'api-kill', 'kafka-stop', 'clickhouse-stop', 'postgres-stop', 'redis-stop'] as const;
type Fault = (typeof ALL_FAULTS)[number];

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '1000000' },
    clients: { type: 'string', default: '8' },
    batch: { type: 'string', default: '500' },
    operators: { type: 'string', default: '12' },
    'outage-scale': { type: 'string', default: '1' },
    'client-timeout': { type: 'string', default: '15000' },
    faults: { type: 'string', default: ALL_FAULTS.join(',') },
    rate: { type: 'string', default: '0' },
  },
});
const TOTAL = Number(args.events);
const CLIENTS = Number(args.clients);
const BATCH = Number(args.batch);
const OPERATORS = Number(args.operators);
const SCALE = Number(args['outage-scale']);
const CLIENT_TIMEOUT_MS = Number(args['client-timeout']);
const RATE = Number(args.rate);
const FAULTS = args.faults!.split(',').map((f) => f.trim()) as Fault[];
for (const f of FAULTS) if (!ALL_FAULTS.includes(f)) throw new Error(`unknown fault ${f}; one of ${ALL_FAULTS.join(', ')}`);
const OUTAGE_S: Record<string, number> = { 'kafka-stop': 30, 'clickhouse-stop': 60, 'postgres-stop': 30, 'redis-stop': 30 };

type StackModule = { up: (o: { quiet: boolean }) => Promise<unknown> };
const stack = (await import(repoPath('scripts', 'stack.mjs'))) as StackModule;
type Engine = { stop(): Promise<string> };
const engines: Record<string, () => Promise<Engine>> = {
  'kafka-stop': async () => (await import(repoPath('scripts', 'stack', 'kafka.mjs'))).kafka as Engine,
  'clickhouse-stop': async () => (await import(repoPath('scripts', 'stack', 'clickhouse.mjs'))).clickhouse as Engine,
  'postgres-stop': async () => (await import(repoPath('scripts', 'stack', 'postgres.mjs'))).postgres as Engine,
  'redis-stop': async () => (await import(repoPath('scripts', 'stack', 'redis.mjs'))).redis as Engine,
};
await stack.up({ quiet: true });

const runId = Date.now().toString(36);
const PORTS = [3191, 3192];
const { cfg: baseCfg } = benchConfig({});
const dbUrl = new URL(baseCfg.DATABASE_URL);
dbUrl.pathname = '/venue_chaos';
const { cfg, env } = benchConfig({
  NODE_ENV: 'production',
  LOG_LEVEL: 'warn',
  DATABASE_URL: dbUrl.toString(),
  CLICKHOUSE_DATABASE: 'venue_chaos',
  KAFKA_TOPIC_PREFIX: `chaos.${runId}`,
  REDIS_KEY_PREFIX: `chaos.${runId}:`,
  RATE_LIMITS_ENABLED: 'false',
  PROCESSOR_TICK_MS: '1000',
  API_METRICS_PORT: '0',
  PIPELINE_METRICS_PORT: '0',
});
console.log(`chaos  ${TOTAL} events, ${CLIENTS} clients, ${BATCH}-event batches, outages × ${SCALE}, faults: ${FAULTS.join(', ')}`);

const admin = new pg.Client({ connectionString: baseCfg.DATABASE_URL });
await admin.connect();
await admin.query('DROP DATABASE IF EXISTS venue_chaos WITH (FORCE)');
await admin.query('CREATE DATABASE venue_chaos');
await admin.end();
const chAdmin = createCh(cfg, null);
await chAdmin.command({ query: 'DROP DATABASE IF EXISTS venue_chaos' });
const db = createDb(cfg, 2);
await migratePostgres(db);
await db.end();
await migrateClickhouse(serverExecutor(chAdmin), 'venue_chaos');
await chAdmin.close();

/** Processes that died without being killed by the runner (a crash is a failure of the fault it happened in). */
const crashes: string[] = [];
const killedByUs = new Set<number>();
function supervised(name: string, entry: string, procEnv: Record<string, string>) {
  const proc = startProcess(name, entry, procEnv);
  proc.child.once('exit', (code, signal) => {
    if (!killedByUs.has(proc.child.pid ?? -1) && code !== 0) crashes.push(`${name} exited (code ${code}, signal ${signal})`);
  });
  return proc;
}
const apis = PORTS.map((port, i) => ({ port, proc: supervised(`api${i}`, 'dist/apps/api/main.js', { ...env, API_PORT: String(port) }) }));
let pipeline = supervised('pipeline', 'dist/apps/pipeline/main.js', env);
// A crash of the runner must not leave its api and pipeline processes behind.
process.on('exit', () => {
  for (const child of [...apis.map((a) => a.proc.child), pipeline.child]) if (child.exitCode === null) child.kill('SIGKILL');
});
const urls = PORTS.map((p) => `http://127.0.0.1:${p}`);
for (const url of urls) await waitFor(url, async () => (await fetch(`${url}/health`)).ok);

async function call(path: string, init: RequestInit & { key?: string } = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(init.headers as Record<string, string>) };
  if (init.key) headers.authorization = `Bearer ${init.key}`;
  const res = await fetch(urls[0] + path, { ...init, headers });
  const body = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

const tenants: FleetTenant[] = [];
for (let i = 0; i < OPERATORS; i++) {
  const op = await call('/api/operators', { method: 'POST', headers: { 'x-admin-key': cfg.ADMIN_SECRET }, body: JSON.stringify({ name: `chaos ${i}`, email: `chaos${i}@example.com`, plan: 'pro' }) });
  await call(`/api/operators/${op.operator_id}/plan`, { method: 'PUT', headers: { 'x-admin-key': cfg.ADMIN_SECRET }, body: JSON.stringify({ plan: 'enterprise' }) });
  const key = op.api_key as string;
  const venue = await call('/api/venues', { method: 'POST', key, body: JSON.stringify({ name: `Chaos ${i}`, timezone: 'UTC', occupancy_reset_hour: 12 }) });
  tenants.push({ key, venueId: venue.id as string, kind: i % 3 === 2 ? 'occupancy' : 'devices' });
}

const fleet = new Fleet({ urls, tenants, batchSize: BATCH, clients: CLIENTS, clientTimeoutMs: CLIENT_TIMEOUT_MS, runTag: runId, rate: RATE });
const ch = createCh(cfg);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The occupancy processor's figure per occupancy venue, against the newest accepted count. */
async function occupancyMismatches(timeoutMs: number): Promise<string[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const wrong: string[] = [];
    for (const t of tenants.filter((x) => x.kind === 'occupancy')) {
      const expected = fleet.stats.newestOccupancy.get(t.venueId);
      if (!expected) continue;
      const got = await call(`/api/venues/${t.venueId}/occupancy`, { key: t.key }).catch(() => null);
      if (got?.occupancy !== expected.value) wrong.push(`${t.venueId}: processor ${got?.occupancy}, replay ${expected.value}`);
    }
    if (wrong.length === 0 || Date.now() > until) return wrong;
    await sleep(1_000);
  }
}

/** Injects one fault while the fleet sends; resolves with the time the fault ended (the system was whole again). */
async function inject(fault: Fault): Promise<number> {
  if (fault === 'pipeline-kill') {
    for (let k = 0; k < 3; k++) {
      await sleep(3_000);
      killedByUs.add(pipeline.child.pid ?? -1);
      pipeline.child.kill('SIGKILL');
      await new Promise((r) => pipeline.child.once('exit', r));
      await sleep(1_000);
      pipeline = supervised('pipeline', 'dist/apps/pipeline/main.js', env);
    }
    return Date.now();
  }
  if (fault === 'api-kill') {
    await sleep(2_000);
    killedByUs.add(apis[1]!.proc.child.pid ?? -1);
    apis[1]!.proc.child.kill('SIGKILL');
    await new Promise((r) => apis[1]!.proc.child.once('exit', r));
    await sleep(5_000 * SCALE);
    apis[1]!.proc = supervised('api1', 'dist/apps/api/main.js', { ...env, API_PORT: String(PORTS[1]) });
    await waitFor('api1 again', async () => (await fetch(`${urls[1]}/health`)).ok);
    return Date.now();
  }
  const engine = await engines[fault]!();
  await sleep(2_000);
  await engine.stop();
  await sleep(OUTAGE_S[fault]! * 1000 * SCALE);
  await stack.up({ quiet: true });
  return Date.now();
}

const perFault = TOTAL / FAULTS.length;
const results: Array<Record<string, unknown>> = [];
let healthy = true;
for (const fault of FAULTS) {
  const before = { ...fleet.stats, refusals: { ...fleet.stats.refusals }, violations: fleet.stats.violations.length, batches: fleet.stats.batchWaits.length, crashes: crashes.length };
  const started = Date.now();
  // The fleet sends for the whole fault, and at least its share of the events.
  let faultOver = false;
  const [, faultEnded] = await Promise.all([
    fleet.ingest(perFault, () => !faultOver),
    inject(fault).then((t) => {
      faultOver = true;
      return t;
    }),
  ]);
  const acceptedAfterFault = fleet.stats.acceptedAt.find((t) => t >= faultEnded);
  const { check, drainMs } = await settle(ch, fleet.stats, 180_000);
  const occupancy = await occupancyMismatches(60_000);
  const refusals = Object.fromEntries(Object.entries(fleet.stats.refusals).map(([s, n]) => [s, n - (before.refusals[Number(s)] ?? 0)]));
  const violations = [...fleet.stats.violations.slice(before.violations), ...crashes.slice(before.crashes)];
  const row = {
    fault,
    seconds: round((Date.now() - started) / 1000, 0),
    accepted: fleet.stats.eventsAccepted - before.eventsAccepted,
    refused: refusals,
    timeouts: fleet.stats.timeouts - before.timeouts,
    connectionErrors: fleet.stats.connectionErrors - before.connectionErrors,
    storedTotal: check.stored,
    acceptedTotal: check.accepted,
    duplicates: check.duplicates,
    missing: check.missing,
    rollupMismatches: check.rollupMismatches.length,
    occupancyMismatches: occupancy,
    violations: violations.slice(0, 5),
    firstAcceptAfterFaultMs: acceptedAfterFault ? acceptedAfterFault - faultEnded : null,
    longestBatchWaitMs: Math.max(0, ...fleet.stats.batchWaits.slice(before.batches)),
    drainMs,
  };
  const ok = check.missing === 0 && check.duplicates === 0 && check.rollupMismatches.length === 0 && occupancy.length === 0 && violations.length === 0 && row.timeouts === 0;
  healthy &&= ok;
  results.push({ ...row, ok });
  console.log(
    `${ok ? 'ok  ' : 'FAIL'} ${fault.padEnd(16)} accepted ${row.accepted}, refused ${JSON.stringify(refusals)}, timeouts ${row.timeouts}, stored ${check.stored}/${check.accepted} ` +
      `(duplicates ${check.duplicates}, missing ${check.missing}), rollup mismatches ${check.rollupMismatches.length}, occupancy mismatches ${occupancy.length}, ` +
      `longest wait for a 202 ${row.longestBatchWaitMs} ms, stored all ${drainMs} ms after the load`,
  );
  if (violations.length) console.log(`     violations: ${violations.slice(0, 3).join(' | ')}`);
}

for (const a of apis) await a.proc.stop();
await pipeline.stop();
await ch.close();

const path = writeResult('chaos', {
  benchmark: 'chaos',
  at: new Date().toISOString(),
  machine: machine(),
  settings: { events: TOTAL, offeredEventsPerSec: RATE || 'unpaced', clients: CLIENTS, batchSize: BATCH, operators: OPERATORS, outageScale: SCALE, clientTimeoutMs: CLIENT_TIMEOUT_MS, faults: FAULTS },
  totals: { accepted: fleet.stats.eventsAccepted, refusals: fleet.stats.refusals, timeouts: fleet.stats.timeouts, connectionErrors: fleet.stats.connectionErrors },
  faults: results,
  ok: healthy,
});
console.log(`\n${healthy ? 'every fault survived' : 'SOME FAULTS FAILED'}; written to ${path}`);
process.exit(healthy ? 0 : 1);
