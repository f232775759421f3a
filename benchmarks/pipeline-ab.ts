/**
 * `npm run bench:pipeline-ab -- --base <checkout>`: the pipeline's CPU per event, two builds side
 * by side. Both read the same events (each its own copy of the topics, its own ClickHouse
 * database) at the same time, so a host whose speed drifts from one minute to the next slows both
 * alike and their ratio holds, where whole bench:ingest runs one after the other differ by ±15 %
 * on a host like 2026-12-01's (benchmarks/README.md, "bench:pipeline-ab"). Each pipeline's CPU is
 * counted from its start until its raw table holds every event, its processors have read their
 * inputs to the end and a derive round has caught up.
 */
import pg from 'pg';
import { createCh } from '../clickhouse/client.js';
import { checkEvents, toCanonical } from '../domain/ingest/ingest.js';
import { createOperator } from '../domain/tenants/operators.js';
import { PLAN_LIMITS } from '../domain/tenants/plans.js';
import { createVenue } from '../domain/venues/venues.js';
import { cliArgs } from '../lib/cli.js';
import type { Config } from '../lib/config.js';
import { encodeIngestReport } from '../lib/events/derived.js';
import type { ConnectorType } from '../lib/events/vocabulary.js';
import { encodeEventMessages } from '../lib/events/wire.js';
import { createKafka, createProducer, topicOffsets } from '../lib/kafka.js';
import { createLogger } from '../lib/logger.js';
import { repoPath } from '../lib/paths.js';
import { derivedTopicNames, ensureTopology, topicNames } from '../lib/topology.js';
import { createDb } from '../postgres/client.js';
import { pseudonyms } from './lib/cpu.js';
import {
  benchConfig,
  chDatabasesOf,
  cpuSecondsOf,
  dropEarlierRunTopics,
  freshDatabases,
  machine,
  round,
  settled,
  startProcess,
  writeResult,
} from './lib/harness.js';
import { ingestBody, randomMac, type BenchVenue } from './lib/requests.js';

const { values: args } = cliArgs(
  'npm run bench:pipeline-ab --',
  "Two builds' pipelines at once over the same events: CPU per event of each, and their ratio.",
  {
    options: {
      base: { type: 'string' },
      events: { type: 'string', default: '400000' },
      operators: { type: 'string', default: '40' },
      'new-devices': { type: 'string', default: '0.1' },
      rounds: { type: 'string', default: '2' },
      out: { type: 'string', default: 'pipeline-ab' },
    },
  },
);
if (!args.base) throw new Error('--base <checkout> is required: the other build, e.g. a worktree of the commit before (built)');
const BATCH = 1000;
const REQUESTS = Math.ceil(Number(args.events) / BATCH);
const OPERATORS = Number(args.operators);
const NEW_DEVICES = Number(args['new-devices']);
const ROUNDS = Number(args.rounds);
/** bench:ingest's pace: a request every 22 ms over all venues (about 45,000 events/s). */
const REQUEST_EVERY_MS = 22;
const SIDES = [
  { side: 'base', root: args.base },
  { side: 'this', root: repoPath() },
] as const;
const POLL_MS = 500;
const DATABASES = 'venue_pab';

const { up } = (await import(repoPath('scripts', 'stack.mjs'))) as { up: (o: { quiet: boolean }) => Promise<unknown> };
await up({ quiet: true });
const runId = Date.now().toString(36);
const { cfg: baseCfg } = benchConfig({});
/** A Postgres database each: the derive job runs in one process per database (an advisory lock). */
const pgName = (side: string) => `${DATABASES}_${side}`;
const pgUrl = (side: string) => {
  const url = new URL(baseCfg.DATABASE_URL);
  url.pathname = `/${pgName(side)}`;
  return url.toString();
};
const configOf = (side: string, r: number) =>
  benchConfig({
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATABASE_URL: pgUrl(side),
    CLICKHOUSE_DATABASE: `${DATABASES}_${runId}_${r}_${side}`,
    KAFKA_TOPIC_PREFIX: `pab.${runId}.${r}.${side}`,
    REDIS_KEY_PREFIX: `pab.${runId}.${r}.${side}:`,
    PIPELINE_METRICS_PORT: '0',
  });

console.log(
  `bench:pipeline-ab  ${REQUESTS * BATCH} events (${REQUESTS} requests of ${BATCH}), ${OPERATORS} operators, ${NEW_DEVICES * 100} % new devices, ${ROUNDS} rounds; base ${args.base}`,
);
await dropEarlierRunTopics(baseCfg.KAFKA_BROKERS, 'pab', `pab.${runId}`);
{
  const ch = createCh(baseCfg, null);
  for (const stale of await chDatabasesOf(ch, DATABASES)) await ch.command({ query: `DROP DATABASE IF EXISTS ${stale}` });
  await ch.close();
}

/** bench:ingest's tenants (three Meraki venues in four, Density for the rest) and its requests as the api publishes them, paced as it sends them. */
async function input(cfg: Config) {
  const db = createDb(cfg, 2);
  const venues: Array<BenchVenue & { operatorId: string; connector: ConnectorType }> = [];
  for (let i = 0; i < OPERATORS; i++) {
    const op = await createOperator(db, { name: `pab ${i}`, email: `pab${i}@example.com`, plan: 'pro' });
    const venue = await createVenue(db, op.operator_id, { name: `Venue ${i}`, timezone: 'Europe/Berlin' });
    const connector = i % 4 === 3 ? 'density' : 'meraki';
    venues.push({
      operatorId: op.operator_id,
      venueId: venue.id,
      connector,
      pool: connector === 'meraki' ? Array.from({ length: 2000 }, randomMac) : [],
    });
  }
  await db.end();
  const limits = PLAN_LIMITS.pro;
  const events: Array<{ key: string; value: Buffer; headers: Record<string, string> }> = [];
  const reports: Array<{ key: string; value: Buffer }> = [];
  const start = Date.now() - REQUESTS * REQUEST_EVERY_MS;
  const last = new Map<string, number>();
  for (let i = 0; i < REQUESTS; i++) {
    const v = venues[i % venues.length]!;
    const now = start + i * REQUEST_EVERY_MS;
    const body = JSON.parse(ingestBody(v, BATCH, NEW_DEVICES, now, last.get(v.venueId))) as { events: unknown[] };
    last.set(v.venueId, now);
    const { valid } = checkEvents(body.events, v.connector, now, { days: limits.retentionDays, plan: limits.label });
    const ctx = {
      key: pseudonyms.keyFor(v.operatorId),
      operatorId: v.operatorId,
      venueId: v.venueId,
      connectorType: v.connector,
      receivedAt: now,
    };
    for (const m of encodeEventMessages(valid.map((e) => toCanonical(e, ctx)))) events.push({ key: v.venueId, ...m });
    const report = {
      operatorId: v.operatorId,
      venueId: v.venueId,
      connectorType: v.connector,
      accepted: valid.length,
      rejected: 0,
      ts: now,
    };
    reports.push({ key: v.venueId, value: encodeIngestReport(report) });
  }
  return { events, reports, count: REQUESTS * BATCH };
}

const rounds: Array<Record<string, { cpuS: number; microsPerEvent: number; settledS: number }>> = [];
for (let r = 1; r <= ROUNDS; r++) {
  const configs = SIDES.map((s) => ({ ...s, ...configOf(s.side, r) }));
  for (const c of configs) await freshDatabases(baseCfg.DATABASE_URL, c.cfg, pgName(c.side));
  // The tenants made once, in the first side's database, and copied whole into the other's.
  const data = await input(configs[0]!.cfg);
  const admin = new pg.Client({ connectionString: baseCfg.DATABASE_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${pgName(configs[1]!.side)} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${pgName(configs[1]!.side)} TEMPLATE ${pgName(configs[0]!.side)}`);
  await admin.end();
  const kafka = createKafka(baseCfg, createLogger('bench', 'warn'), 'bench-pab');
  // Idempotent: a send retried after a timeout must not write its messages twice.
  const producer = createProducer(kafka);
  await producer.connect();
  for (const c of configs) {
    await ensureTopology(kafka, c.cfg);
    const topics = {
      events: topicNames(c.cfg.KAFKA_TOPIC_PREFIX).events,
      reports: derivedTopicNames(c.cfg.KAFKA_TOPIC_PREFIX).ingestReports,
    };
    for (let i = 0; i < data.events.length; i += 200)
      await producer.send({ topic: topics.events, messages: data.events.slice(i, i + 200) });
    for (let i = 0; i < data.reports.length; i += 500)
      await producer.send({ topic: topics.reports, messages: data.reports.slice(i, i + 500) });
  }
  await producer.disconnect();
  const kafkaAdmin = kafka.admin();
  await kafkaAdmin.connect();
  for (const c of configs) {
    const held = (await topicOffsets(kafkaAdmin, topicNames(c.cfg.KAFKA_TOPIC_PREFIX).events)).reduce((n, o) => n + Number(o.high), 0);
    if (held !== data.events.length) throw new Error(`${c.side}'s events topic holds ${held} messages, not the ${data.events.length} sent`);
  }
  await kafkaAdmin.disconnect();
  // Started together, in alternating order, each measured to its own caught-up moment.
  const order = r % 2 === 1 ? configs : [...configs].reverse();
  const started = performance.now();
  const running = order.map((c) => ({
    c,
    proc: startProcess(`pipeline-${c.side}`, 'dist/apps/pipeline/main.js', c.env, undefined, c.root),
  }));
  const result: (typeof rounds)[number] = {};
  await Promise.all(
    running.map(async ({ c, proc }) => {
      const ch = createCh(c.cfg);
      const admin = kafka.admin();
      await admin.connect();
      await settled(ch, admin, c.cfg.KAFKA_TOPIC_PREFIX, data.count, POLL_MS);
      await admin.disconnect();
      const cpuS = cpuSecondsOf({ p: proc.child.pid }).p!;
      result[c.side] = {
        cpuS: round(cpuS, 2),
        microsPerEvent: round((cpuS * 1e6) / data.count, 2),
        settledS: round((performance.now() - started) / 1000, 1),
      };
      await ch.close();
    }),
  );
  for (const { proc } of running) await proc.stop();
  rounds.push(result);
  console.log(
    `round ${r}: base ${result.base!.microsPerEvent} µs/event (${result.base!.settledS} s), this ${result.this!.microsPerEvent} µs/event (${result.this!.settledS} s); this / base ${round(result.this!.microsPerEvent / result.base!.microsPerEvent, 3)}`,
  );
}
const ratios = rounds.map((x) => x.this!.microsPerEvent / x.base!.microsPerEvent);
const summary = {
  benchmark: 'pipeline-ab',
  at: new Date().toISOString(),
  machine: machine(),
  settings: { events: REQUESTS * BATCH, operators: OPERATORS, newDeviceShare: NEW_DEVICES, rounds: ROUNDS, base: args.base },
  rounds,
  thisOverBase: ratios.map((x) => round(x, 3)),
  meanThisOverBase: round(ratios.reduce((a, b) => a + b, 0) / ratios.length, 3),
};
const path = writeResult(args.out!, summary);
console.log(`this / base ${summary.meanThisOverBase} on average (${summary.thisOverBase.join(', ')}); written to ${path}`);
process.exit(0);
