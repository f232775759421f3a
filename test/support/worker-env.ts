// e2e files run three at a time (vitest.config.ts). Each worker gets a Postgres database, Kafka topics,
// consumer groups and Redis keys of its own, so two files' pipelines never join one group or read
// each other's events, and what spans every tenant (the pollers' leases, /health's counts) sees one
// file's rows. ClickHouse is shared (every test creates its own tenants). Processes a test spawns
// inherit this environment. Runs before each file; the first run in a worker changes it.
import { TEST_WORKERS, workerDb } from './workers.js';

const worker = process.env.VITEST_POOL_ID;
const base = process.env.KAFKA_TOPIC_PREFIX;
if (worker && base && !base.endsWith(`.w${worker}`)) {
  const n = Number(worker);
  if (!(n >= 1 && n <= TEST_WORKERS)) throw new Error(`e2e worker ${worker}: global-setup prepares databases for ${TEST_WORKERS} workers`);
  const url = new URL(process.env.DATABASE_URL!);
  const [, dbBase, runId] = /^\/(.+)_test_([0-9a-z]+)$/.exec(url.pathname) ?? [];
  if (!dbBase || !runId) throw new Error(`e2e worker ${worker}: DATABASE_URL is not a run database of global-setup`);
  url.pathname = `/${workerDb(dbBase, n, runId)}`;
  process.env.DATABASE_URL = url.toString();
  process.env.KAFKA_TOPIC_PREFIX = `${base}.w${worker}`;
  process.env.REDIS_KEY_PREFIX = `${base}.w${worker}:`;
}
