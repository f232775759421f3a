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
 * With --brokers 3 every process uses the stack's three-node Kafka cluster and the fault is
 * `broker-kill`: the active controller (which also leads a third of the partitions) is killed with
 * -9 and started again 30 s later; besides the checks above, not one 503 while two brokers remain,
 * and the node rejoins by itself (the events topic back to three in-sync replicas).
 *
 * With --clickhouse-cluster every process uses the stack's ClickHouse cluster (2 shards x 2
 * replicas, ZooKeeper; cluster mode, docs/scaling.md#clickhouse) and the fault is `replica-kill`:
 * the replica that the entry node sends one shard's inserts and reads to is killed with -9 and
 * started again 30 s later; besides the checks above, queries through the Distributed tables are
 * probed every 500 ms throughout (each must answer), and the restarted replica must hold exactly
 * what its shard-mate holds (it catches up from the replication log).
 *
 * Flags: --events (total, default 1,000,000), --clients, --batch, --outage-scale (1 = the full
 * outages: Kafka 30 s, ClickHouse 60 s, Postgres 30 s, Redis 30 s, a cluster node 30 s), --faults
 * (comma list), --rate (offered events/s; 0 = as fast as the api answers), --brokers (1 or 3).
 * Results: benchmarks/results/chaos.json (chaos-cluster.json with --brokers 3,
 * chaos-clickhouse-cluster.json with --clickhouse-cluster). Never run the
 * engine faults while others use the shared stack: they stop the engines (broker-kill only touches
 * the cluster).
 */
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { Kafka, logLevel } from 'kafkajs';
import { chRows, chsql, createCh } from '../clickhouse/client.js';
import { migrateClickhouse, serverExecutor } from '../clickhouse/migrate.js';
import { dropEarlierClusterDatabases, freshPostgres, replicaCounts, replicationQueueEmpty } from './lib/clickhouse-cluster.js';
import { topicNames } from '../lib/topology.js';
import { repoPath } from '../lib/paths.js';
import { benchConfig, dropEarlierRunTopics, freshDatabases, machine, round, startProcess, waitFor, writeResult } from './lib/harness.js';
import { Fleet, settle, type FleetTenant } from './lib/fleet.js';
import { cliArgs } from '../lib/cli.js';

const SINGLE_BROKER_FAULTS = ['pipeline-kill', 'api-kill', 'kafka-stop', 'clickhouse-stop', 'postgres-stop', 'redis-stop'] as const;
const ALL_FAULTS = [...SINGLE_BROKER_FAULTS, 'broker-kill', 'replica-kill'] as const;
type Fault = (typeof ALL_FAULTS)[number];

const { values: args } = cliArgs(
  'npm run chaos --',
  'Fault injection under load: kills or stops engines and processes during ingest and checks every accepted event is stored exactly once (benchmarks/README.md).',
  {
    options: {
      events: { type: 'string', default: '1000000' },
      clients: { type: 'string', default: '8' },
      batch: { type: 'string', default: '500' },
      operators: { type: 'string', default: '12' },
      'outage-scale': { type: 'string', default: '1' },
      'client-timeout': { type: 'string', default: '15000' },
      faults: { type: 'string' },
      rate: { type: 'string', default: '0' },
      brokers: { type: 'string', default: '1' },
      'clickhouse-cluster': { type: 'boolean', default: false },
    },
  },
);
const CH_CLUSTER = !!args['clickhouse-cluster'];
const BROKERS = Number(args.brokers);
if (BROKERS !== 1 && BROKERS !== 3) throw new Error('--brokers is 1 (the single broker) or 3 (the cluster)');
const TOTAL = Number(args.events);
const CLIENTS = Number(args.clients);
const BATCH = Number(args.batch);
const OPERATORS = Number(args.operators);
const SCALE = Number(args['outage-scale']);
const CLIENT_TIMEOUT_MS = Number(args['client-timeout']);
const RATE = Number(args.rate);
const FAULTS = (args.faults ?? (CH_CLUSTER ? 'replica-kill' : BROKERS === 3 ? 'broker-kill' : SINGLE_BROKER_FAULTS.join(',')))
  .split(',')
  .map((f) => f.trim()) as Fault[];
for (const f of FAULTS) if (!ALL_FAULTS.includes(f)) throw new Error(`unknown fault ${f}; one of ${ALL_FAULTS.join(', ')}`);
// kafka-stop stops the single broker, which a run on the cluster does not use.
if (BROKERS === 3 && FAULTS.includes('kafka-stop'))
  throw new Error('kafka-stop is a fault of the single broker; with --brokers 3 use broker-kill');
if (BROKERS === 1 && FAULTS.includes('broker-kill')) throw new Error('broker-kill needs the cluster: --brokers 3');
// clickhouse-stop stops the single server, which a run on the ClickHouse cluster does not use.
if (CH_CLUSTER && FAULTS.includes('clickhouse-stop'))
  throw new Error('clickhouse-stop is a fault of the single server; with --clickhouse-cluster use replica-kill');
if (!CH_CLUSTER && FAULTS.includes('replica-kill')) throw new Error('replica-kill needs the ClickHouse cluster: --clickhouse-cluster');
const OUTAGE_S: Record<string, number> = {
  'kafka-stop': 30,
  'clickhouse-stop': 60,
  'postgres-stop': 30,
  'redis-stop': 30,
  'broker-kill': 30,
  'replica-kill': 30,
};

type ChNode = { name: string; url: string; shard: number; replica: number; pid(): number | null; kill(): Promise<boolean> };
type StackModule = {
  up: (o: { quiet: boolean; brokers?: number; clickhouseCluster?: boolean }) => Promise<{ env: Record<string, string> }>;
  clickhouseNodes: ChNode[];
  kafkaCluster: Array<{ name: string; nodeId: number; pid(): number | null }>;
  quorumLeader(): Promise<number | null>;
};
const stack = (await import(repoPath('scripts', 'stack.mjs'))) as StackModule;
type Engine = { stop(): Promise<string> };
const engines: Record<string, () => Promise<Engine>> = {
  'kafka-stop': async () => (await import(repoPath('scripts', 'stack', 'kafka.mjs'))).kafka as Engine,
  'clickhouse-stop': async () => (await import(repoPath('scripts', 'stack', 'clickhouse.mjs'))).clickhouse as Engine,
  'postgres-stop': async () => (await import(repoPath('scripts', 'stack', 'postgres.mjs'))).postgres as Engine,
  'redis-stop': async () => (await import(repoPath('scripts', 'stack', 'redis.mjs'))).redis as Engine,
};
const { env: stackEnv } = await stack.up({ quiet: true, brokers: BROKERS, clickhouseCluster: CH_CLUSTER });

const runId = Date.now().toString(36);
// A ClickHouse-cluster run keeps apart from a run on one server (its own ports, Postgres database
// and topic family), so the two never drop each other's databases or topics.
const PORTS = CH_CLUSTER ? [3193, 3194] : [3191, 3192];
const FAMILY = CH_CLUSTER ? 'chaosch' : 'chaos';
const PG_DB = CH_CLUSTER ? 'venue_chaos_ch' : 'venue_chaos';
const { cfg: baseCfg } = benchConfig({});
const dbUrl = new URL(baseCfg.DATABASE_URL);
dbUrl.pathname = `/${PG_DB}`;
const { cfg, env } = benchConfig({
  NODE_ENV: 'production',
  LOG_LEVEL: 'warn',
  DATABASE_URL: dbUrl.toString(),
  CLICKHOUSE_DATABASE: 'venue_chaos',
  KAFKA_TOPIC_PREFIX: `${FAMILY}.${runId}`,
  REDIS_KEY_PREFIX: `${FAMILY}.${runId}:`,
  RATE_LIMITS_ENABLED: 'false',
  PROCESSOR_TICK_MS: '1000',
  API_METRICS_PORT: '0',
  PIPELINE_METRICS_PORT: '0',
  // Every process the runner starts uses the cluster's three brokers.
  ...(BROKERS === 3 ? { KAFKA_BROKERS: stackEnv.KAFKA_BROKERS! } : {}),
  // Cluster mode on the stack's ClickHouse cluster, in a database of this run's own (the replicated
  // tables' ZooKeeper paths name it, so nothing of an earlier run is reused).
  ...(CH_CLUSTER
    ? {
        CLICKHOUSE_URL: stackEnv.CLICKHOUSE_URL!,
        CLICKHOUSE_CLUSTER: stackEnv.CLICKHOUSE_CLUSTER!,
        CLICKHOUSE_CLUSTER_NODES: stackEnv.CLICKHOUSE_CLUSTER_NODES!,
        CLICKHOUSE_DATABASE: `venue_chaos_c${runId}`,
      }
    : {}),
});
console.log(
  `chaos  ${TOTAL} events, ${CLIENTS} clients, ${BATCH}-event batches, outages × ${SCALE}, faults: ${FAULTS.join(', ')}, Kafka: ${cfg.KAFKA_BROKERS.join(',')}`,
);

if (CH_CLUSTER) {
  await dropEarlierClusterDatabases(cfg, 'venue_chaos_c');
  await freshPostgres(baseCfg.DATABASE_URL, cfg, PG_DB);
  const admin = createCh(cfg, null, { requestTimeoutMs: 600_000 });
  await migrateClickhouse(serverExecutor(admin), cfg.CLICKHOUSE_DATABASE);
  await admin.close();
} else {
  await freshDatabases(baseCfg.DATABASE_URL, cfg, 'venue_chaos');
}
// Earlier runs' topics would be recovered too when a stopped broker restarts: slower with every run.
await dropEarlierRunTopics(cfg.KAFKA_BROKERS, FAMILY, cfg.KAFKA_TOPIC_PREFIX);

const kafkaAdmin =
  BROKERS === 3 ? new Kafka({ brokers: cfg.KAFKA_BROKERS, clientId: 'chaos-admin', logLevel: logLevel.NOTHING }).admin() : null;
await kafkaAdmin?.connect();

/** Processes that died without being killed by the runner (a crash is a failure of the fault it happened in). */
const crashes: string[] = [];
const killedByUs = new Set<number>();
// Every process's log (warnings and errors), kept for reading after a failed fault.
const LOG_DIR = repoPath('.stack', 'chaos-logs', runId);
mkdirSync(LOG_DIR, { recursive: true });
function supervised(name: string, entry: string, procEnv: Record<string, string>) {
  const proc = startProcess(name, entry, procEnv, (line) => appendFileSync(`${LOG_DIR}/${name}.log`, `${line}\n`));
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
  const op = await call('/api/operators', {
    method: 'POST',
    headers: { 'x-admin-key': cfg.ADMIN_SECRET },
    body: JSON.stringify({ name: `chaos ${i}`, email: `chaos${i}@example.com`, plan: 'pro' }),
  });
  await call(`/api/operators/${op.operator_id}/plan`, {
    method: 'PUT',
    headers: { 'x-admin-key': cfg.ADMIN_SECRET },
    body: JSON.stringify({ plan: 'enterprise' }),
  });
  const key = op.api_key as string;
  const venue = await call('/api/venues', {
    method: 'POST',
    key,
    body: JSON.stringify({ name: `Chaos ${i}`, timezone: 'UTC', occupancy_reset_hour: 12 }),
  });
  tenants.push({ key, venueId: venue.id as string, kind: i % 3 === 2 ? 'occupancy' : 'devices' });
}

const fleet = new Fleet({
  urls,
  tenants,
  batchSize: BATCH,
  clients: CLIENTS,
  clientTimeoutMs: CLIENT_TIMEOUT_MS,
  runTag: runId,
  rate: RATE,
});
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

const eventsTopic = topicNames(cfg.KAFKA_TOPIC_PREFIX).events;
/** Alive and not a zombie (a node the runner itself restarted is its child until reaped). */
const pidAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !/\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

/** Per partition of the events topic: its leader and how many replicas are in sync. */
async function eventsPartitions(): Promise<Array<{ leader: number; isr: number }>> {
  const { topics } = await kafkaAdmin!.fetchTopicMetadata({ topics: [eventsTopic] });
  return topics[0]!.partitions.map((p) => ({ leader: p.leader, isr: p.isr.length }));
}

/** What the broker kill measured; filled in by inject('broker-kill'). */
let brokerKill: Record<string, unknown> = {};

/** What the replica kill measured; filled in by inject('replica-kill'). */
let replicaKill: Record<string, unknown> = {};

/**
 * Queries through the Distributed tables every 500 ms until `stop()`: how many answered, failed,
 * and the slowest answer. The query reads every shard (a count of the run's events and a rollup).
 */
function probeQueries() {
  const probe = { answered: 0, failed: 0, slowestMs: 0, errors: [] as string[] };
  let running = true;
  const done = (async () => {
    while (running) {
      const t0 = Date.now();
      try {
        await chRows(ch, chsql`SELECT toUInt64(count()) AS n FROM events`);
        await chRows(ch, chsql`SELECT toUInt64(countMerge(v_count)) AS n FROM telemetry_1m WHERE key = 'events'`);
        probe.answered++;
      } catch (err) {
        probe.failed++;
        if (probe.errors.length < 3) probe.errors.push((err as Error).message.slice(0, 200));
      }
      probe.slowestMs = Math.max(probe.slowestMs, Date.now() - t0);
      await sleep(500);
    }
  })();
  return {
    probe,
    async stop() {
      running = false;
      await done;
      return probe;
    },
  };
}

/** Injects one fault while the fleet sends; resolves with the time the fault ended (the system was whole again). */
async function inject(fault: Fault): Promise<number> {
  if (fault === 'replica-kill') {
    await sleep(5_000);
    // The entry node (s1r1) serves shard 1 itself; shard 2's inserts and reads go to its first
    // replica (load_balancing in_order): killing that one moves them to the second.
    const victim = stack.clickhouseNodes.find((n) => n.shard === 2 && n.replica === 1)!;
    const mate = stack.clickhouseNodes.find((n) => n.shard === 2 && n.replica === 2)!;
    const probes = probeQueries();
    const refusedBefore = { ...fleet.stats.refusals };
    const killedAt = Date.now();
    if (!(await victim.kill())) throw new Error(`${victim.name} is not running`);
    await sleep(OUTAGE_S[fault]! * 1000 * SCALE);
    const whileDown = { ...probes.probe };
    const restartAt = Date.now();
    await stack.up({ quiet: true, clickhouseCluster: true });
    const readyAt = Date.now();
    // Caught up: the restarted replica's replication queue (the parts written meanwhile, to fetch) empty.
    const caughtUpAt = await replicationQueueEmpty(cfg, victim, 180_000);
    replicaKill = {
      node: victim.name,
      restartToQueueEmptyMs: caughtUpAt === null ? null : caughtUpAt - restartAt,
      downSeconds: round((readyAt - killedAt) / 1000, 1),
      queriesWhileDown: whileDown,
      refusedWhileDown: Object.fromEntries(
        Object.entries(fleet.stats.refusals)
          .map(([st, n]) => [st, n - (refusedBefore[Number(st)] ?? 0)])
          .filter(([, n]) => Number(n) > 0),
      ),
      restartToReadyMs: readyAt - restartAt,
      mate: mate.name,
    };
    (replicaKill as { probes: typeof probes }).probes = probes;
    return Date.now();
  }
  if (fault === 'broker-kill') {
    await sleep(3_000);
    // The active controller: its loss needs a new quorum leader before the dead broker is fenced
    // and its partitions get new leaders, the longest failover one kill can cause.
    const victimId = await stack.quorumLeader();
    const victim = stack.kafkaCluster.find((n) => n.nodeId === victimId);
    const pid = victim?.pid();
    if (!victim || !pid) throw new Error(`no running cluster node is the quorum leader (${victimId})`);
    const led = (await eventsPartitions()).filter((p) => p.leader === victim.nodeId).length;
    const refusedBefore = { ...fleet.stats.refusals };
    const killedAt = Date.now();
    process.kill(pid, 'SIGKILL');
    for (const until = Date.now() + 5_000; pidAlive(pid) && Date.now() < until;) await sleep(50);
    await sleep(OUTAGE_S[fault]! * 1000 * SCALE);
    // The supervisor starts the node again; it catches up from the others without help.
    const restartAt = Date.now();
    await stack.up({ quiet: true, brokers: 3 });
    const readyAt = Date.now();
    const refusedWhileTwo = Object.fromEntries(
      Object.entries(fleet.stats.refusals)
        .map(([st, n]) => [st, n - (refusedBefore[Number(st)] ?? 0)])
        .filter(([, n]) => Number(n) > 0),
    ) as Record<string, number>;
    let isrAt: number | null = null;
    const isrDeadline = Date.now() + 120_000;
    while (isrAt === null && Date.now() < isrDeadline) {
      const parts = await eventsPartitions().catch(() => []);
      if (parts.length > 0 && parts.every((p) => p.isr === 3)) isrAt = Date.now();
      else await sleep(250);
    }
    brokerKill = {
      node: victim.name,
      wasActiveController: true,
      eventsPartitionsLed: led,
      twoBrokersSeconds: round((readyAt - killedAt) / 1000, 1),
      refusedWhileTwoBrokers: refusedWhileTwo,
      restartToReadyMs: readyAt - restartAt,
      restartToIsr3Ms: isrAt === null ? null : isrAt - restartAt,
    };
    return Date.now();
  }
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
  const before = {
    ...fleet.stats,
    refusals: { ...fleet.stats.refusals },
    violations: fleet.stats.violations.length,
    batches: fleet.stats.batchWaits.length,
    crashes: crashes.length,
  };
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
  let replicasOk = true;
  if (fault === 'replica-kill') {
    const probes = (replicaKill as { probes?: { stop(): Promise<Record<string, unknown>> } }).probes!;
    delete (replicaKill as { probes?: unknown }).probes;
    replicaKill.queriesWholeFault = await probes.stop();
    // The restarted replica catches up from the replication log: every table of the shard as on its mate.
    const byName = (name: unknown) => stack.clickhouseNodes.find((n) => n.name === name)!;
    const caughtUp = await replicaCounts(cfg, byName(replicaKill.node), byName(replicaKill.mate), 180_000);
    replicaKill = { ...replicaKill, ...caughtUp };
    const q = replicaKill.queriesWholeFault as { failed: number };
    replicasOk = q.failed === 0 && caughtUp.caughtUp === true && replicaKill.restartToQueueEmptyMs !== null;
  }
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
    ...(fault === 'broker-kill' ? { brokerKill } : {}),
    ...(fault === 'replica-kill' ? { replicaKill } : {}),
  };
  // A broker kill must not be seen at all: no 503 while two brokers remain, and the node back in every ISR.
  const brokerKillOk =
    fault !== 'broker-kill' || (!(brokerKill.refusedWhileTwoBrokers as Record<string, number>)[503] && brokerKill.restartToIsr3Ms !== null);
  const ok =
    check.missing === 0 &&
    check.duplicates === 0 &&
    check.rollupMismatches.length === 0 &&
    occupancy.length === 0 &&
    violations.length === 0 &&
    row.timeouts === 0 &&
    brokerKillOk &&
    replicasOk;
  healthy &&= ok;
  results.push({ ...row, ok });
  console.log(
    `${ok ? 'ok  ' : 'FAIL'} ${fault.padEnd(16)} accepted ${row.accepted}, refused ${JSON.stringify(refusals)}, timeouts ${row.timeouts}, stored ${check.stored}/${check.accepted} ` +
      `(duplicates ${check.duplicates}, missing ${check.missing}), rollup mismatches ${check.rollupMismatches.length}, occupancy mismatches ${occupancy.length}, ` +
      `longest wait for a 202 ${row.longestBatchWaitMs} ms, stored all ${drainMs} ms after the load`,
  );
  if (violations.length) console.log(`     violations: ${violations.slice(0, 3).join(' | ')}`);
  if (fault === 'replica-kill') console.log(`     ${JSON.stringify(replicaKill)}`);
  if (fault === 'broker-kill') {
    const b = brokerKill;
    console.log(
      `     killed ${b.node} (active controller, led ${b.eventsPartitionsLed} events partitions) for ${b.twoBrokersSeconds} s: refused while two brokers remained ${JSON.stringify(b.refusedWhileTwoBrokers)}; ` +
        `restarted in ${b.restartToReadyMs} ms, ISR back to 3 ${b.restartToIsr3Ms ?? 'never (120 s)'} ms after the restart began`,
    );
  }
}

for (const a of apis) await a.proc.stop();
await pipeline.stop();
await ch.close();
await kafkaAdmin?.disconnect();

const path = writeResult(CH_CLUSTER ? 'chaos-clickhouse-cluster' : BROKERS === 3 ? 'chaos-cluster' : 'chaos', {
  benchmark: 'chaos',
  at: new Date().toISOString(),
  machine: machine(),
  settings: {
    events: TOTAL,
    offeredEventsPerSec: RATE || 'unpaced',
    clients: CLIENTS,
    batchSize: BATCH,
    operators: OPERATORS,
    outageScale: SCALE,
    clientTimeoutMs: CLIENT_TIMEOUT_MS,
    faults: FAULTS,
    brokers: BROKERS,
    clickhouse: CH_CLUSTER
      ? { cluster: cfg.CLICKHOUSE_CLUSTER, nodes: cfg.CLICKHOUSE_CLUSTER_NODES, entry: cfg.CLICKHOUSE_URL }
      : 'one server',
  },
  totals: {
    accepted: fleet.stats.eventsAccepted,
    refusals: fleet.stats.refusals,
    timeouts: fleet.stats.timeouts,
    connectionErrors: fleet.stats.connectionErrors,
  },
  faults: results,
  ok: healthy,
});
console.log(`\n${healthy ? 'every fault survived' : 'SOME FAULTS FAILED'}; written to ${path}; process logs in ${LOG_DIR}`);
process.exit(healthy ? 0 : 1);
