// e2e files run two at a time (vitest.config.ts). Each worker gets Kafka topics, consumer groups and
// Redis keys of its own, so two files' pipelines never join one group or read each other's events;
// Postgres and ClickHouse are shared (every test creates its own tenants). Processes a test spawns
// inherit this environment. Runs before each file; the first run in a worker changes it.
const worker = process.env.VITEST_POOL_ID;
const base = process.env.KAFKA_TOPIC_PREFIX;
if (worker && base && !base.endsWith(`.w${worker}`)) {
  process.env.KAFKA_TOPIC_PREFIX = `${base}.w${worker}`;
  process.env.REDIS_KEY_PREFIX = `${base}.w${worker}:`;
}
