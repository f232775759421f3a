import { readFileSync } from 'node:fs';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { createClient } from '@clickhouse/client';
// @ts-expect-error plain ESM script without types
import { up } from '../../scripts/stack.mjs';
import { loadConfig, parseDotenv } from '../../lib/config.js';
import { repoPath } from '../../lib/paths.js';
import { createDb } from '../../postgres/client.js';
import { migratePostgres } from '../../postgres/migrate.js';
import { createCh } from '../../clickhouse/client.js';
import { migrateClickhouse, serverExecutor } from '../../clickhouse/migrate.js';
import { TEST_WORKERS, workerDb } from './workers.js';

const STALE_MS = 2 * 60 * 60 * 1000;
const runId = Date.now().toString(36);
const isStale = (id: string | undefined) => !!id && /^[0-9a-z]+$/.test(id) && Date.now() - parseInt(id, 36) > STALE_MS;

/**
 * Ensures the local stack is up (the same script as `npm run up`), then gives this run its own
 * Postgres and ClickHouse databases and Kafka topic prefix, so runs never touch development data
 * or each other. They are dropped at the end; leftovers of crashed runs are dropped after 2 h.
 */
export default async function setup(): Promise<() => Promise<void>> {
  await up({ quiet: true });
  const fileEnv = parseDotenv(readFileSync(repoPath('.env'), 'utf8'));
  const base = loadConfig({ ...fileEnv, ...process.env });

  const pgAdmin = new pg.Client({ connectionString: base.DATABASE_URL });
  await pgAdmin.connect();
  const dbBase = new URL(base.DATABASE_URL).pathname.slice(1) || 'venue';
  const testDb = `${dbBase}_test_${runId}`;
  const { rows } = await pgAdmin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE $1`, [
    `${dbBase}\\_test\\_%`,
  ]);
  for (const { datname } of rows) {
    if (isStale(datname.split('_').pop())) await pgAdmin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
  }
  await pgAdmin.query(`CREATE DATABASE ${testDb}`);

  const chTestDb = `${base.CLICKHOUSE_DATABASE}_test_${runId}`;
  const chAdmin = createClient({ url: base.CLICKHOUSE_URL, username: base.CLICKHOUSE_USER, password: base.CLICKHOUSE_PASSWORD });
  const chDbs = (await (await chAdmin.query({ query: 'SELECT name FROM system.databases', format: 'JSONEachRow' })).json()) as Array<{
    name: string;
  }>;
  for (const { name } of chDbs) {
    if (name.startsWith(`${base.CLICKHOUSE_DATABASE}_test_`) && isStale(name.split('_').pop())) {
      await chAdmin.command({ query: `DROP DATABASE IF EXISTS ${name}` });
    }
  }

  const kafka = new Kafka({ brokers: base.KAFKA_BROKERS, clientId: 'test-setup', logLevel: logLevel.NOTHING });
  const kadmin = kafka.admin();
  await kadmin.connect();
  const staleTopics = (await kadmin.listTopics()).filter((t) => t.startsWith('test.') && isStale(t.split('.')[1]));
  if (staleTopics.length > 0) await kadmin.deleteTopics({ topics: staleTopics }).catch(() => undefined);

  const testDbUrl = new URL(base.DATABASE_URL);
  testDbUrl.pathname = `/${testDb}`;
  const topicPrefix = `test.${runId}`;
  Object.assign(process.env, {
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    DATABASE_URL: testDbUrl.toString(),
    CLICKHOUSE_DATABASE: chTestDb,
    KAFKA_TOPIC_PREFIX: topicPrefix,
    REDIS_KEY_PREFIX: `${topicPrefix}:`,
    KAFKA_PARTITIONS: '3',
    // Every suite calls from 127.0.0.1: the per-address budget of refused keys would trip across
    // suites; the test of that limit sets its own small one.
    UNAUTHENTICATED_RATE_LIMIT: '1000000',
    // Processes started by tests serve no metrics port (tests that check metrics pick a free one).
    API_METRICS_PORT: '0',
    EDGE_METRICS_PORT: '0',
    PIPELINE_METRICS_PORT: '0',
  });
  const cfg = loadConfig({ ...fileEnv, ...process.env });
  const db = createDb(cfg, 2);
  await migratePostgres(db);
  await db.end();
  // One copy of the migrated database per e2e worker (test/support/worker-env.ts): leases, counts and
  // lists that span every tenant (pollers, /health) then never see another file's rows.
  for (let w = 1; w <= TEST_WORKERS; w++) await pgAdmin.query(`CREATE DATABASE ${workerDb(dbBase, w, runId)} TEMPLATE ${testDb}`);
  const ch = createCh(cfg, null);
  await migrateClickhouse(serverExecutor(ch), chTestDb);
  await ch.close();

  return async () => {
    if (process.env.KEEP_TEST_DATA) return;
    for (const name of [testDb, ...Array.from({ length: TEST_WORKERS }, (_, i) => workerDb(dbBase, i + 1, runId))]) {
      await pgAdmin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    }
    await pgAdmin.end();
    await chAdmin.command({ query: `DROP DATABASE IF EXISTS ${chTestDb}` }).catch(() => undefined);
    await chAdmin.close();
    const mine = (await kadmin.listTopics()).filter((t) => t.startsWith(`${topicPrefix}.`));
    if (mine.length > 0) await kadmin.deleteTopics({ topics: mine }).catch(() => undefined);
    await kadmin.disconnect();
  };
}
