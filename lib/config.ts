import { readFileSync, existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { z } from 'zod';
import { repoPath } from './paths.js';

const base64Key = (bytes: number) =>
  z.string().refine((v) => Buffer.from(v, 'base64').length === bytes, `a base64 string encoding exactly ${bytes} bytes`);

const port = z.coerce.number().int().min(1).max(65535);

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/** An IP address or CIDR block (`10.0.0.0/8`, `fd00::/8`). */
function isAddressOrBlock(entry: string): boolean {
  const [addr, bits, extra] = entry.split('/');
  const family = isIP(addr ?? '');
  if (!family || extra !== undefined) return false;
  return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
}

const configSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * The level of the api's one line per answered request. `npm run up` sets debug, so its terminal
   * shows what happens rather than every call of the dashboard (`--access-log` brings them back).
   */
  ACCESS_LOG_LEVEL: z.enum(['info', 'debug']).default('info'),
  PUBLIC_URL: z.url({ protocol: /^https?$/ }).default('http://127.0.0.1:8080'),
  API_HOST: z.string().min(1).default('127.0.0.1'),
  API_PORT: port.default(3000),
  EDGE_HOST: z.string().min(1).default('127.0.0.1'),
  EDGE_PORT: port.default(3001),
  DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }),
  CLICKHOUSE_URL: z.url({ protocol: /^https?$/ }),
  CLICKHOUSE_DATABASE: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'a plain identifier')
    .default('venue'),
  CLICKHOUSE_USER: z.string().default('default'),
  CLICKHOUSE_PASSWORD: z.string().default(''),
  CLICKHOUSE_COMPRESSION: bool.default(false),
  /**
   * Cluster mode (docs/scaling.md#clickhouse): the name of the cluster in the servers'
   * <remote_servers>. Empty (the default) is one server. Set, the migrations create replicated
   * tables in `<CLICKHOUSE_DATABASE>_local` on every node of CLICKHOUSE_CLUSTER_NODES and
   * `Distributed` tables under the usual names in CLICKHOUSE_DATABASE, which the processes use
   * through CLICKHOUSE_URL (any node).
   */
  CLICKHOUSE_CLUSTER: z
    .string()
    .regex(/^([A-Za-z_][A-Za-z0-9_]*)?$/, 'a plain identifier')
    .default(''),
  /** Cluster mode: every node's HTTP URL, comma-separated (migrations and retention reach each one). */
  CLICKHOUSE_CLUSTER_NODES: z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((u) => u.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.url({ protocol: /^https?$/ }))),
  KAFKA_BROKERS: z
    .string()
    .regex(/^[^,\s:]+:\d+(,[^,\s:]+:\d+)*$/, 'comma-separated host:port pairs')
    .transform((v) => v.split(',')),
  KAFKA_CLIENT_ID: z.string().min(1).default('venue-telemetry'),
  KAFKA_TOPIC_PREFIX: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]*$/, 'lower-case letters, digits, ".", "_" or "-"')
    .default('venue'),
  KAFKA_PARTITIONS: z.coerce.number().int().min(1).max(256).default(6),
  REDIS_URL: z.url({ protocol: /^rediss?$/ }),
  /** Put into REDIS_URL when the URL carries none (the local stack generates it; docs/security.md). */
  REDIS_PASSWORD: z.string().default(''),
  /** Namespaces every Redis key, so environments sharing one Redis (dev, tests, benchmarks) never mix counters. */
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[\w.:-]{0,64}$/, 'up to 64 letters, digits, ".", ":", "_" or "-"')
    .default('venue:'),
  ADMIN_SECRET: z.string().min(16, 'at least 16 characters'),
  SECRETS_KEY: base64Key(32),
  SECRETS_KEY_ID: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,32}$/, 'a short key id such as k1')
    .default('k1'),
  SECRETS_PREVIOUS_KEYS: z
    .string()
    .default('')
    .transform((v, ctx) => {
      const keys: Record<string, Buffer> = {};
      for (const pair of v.split(',').filter(Boolean)) {
        const [id, key] = pair.split(':');
        const buf = key ? Buffer.from(key, 'base64') : Buffer.alloc(0);
        if (!id || buf.length !== 32) {
          ctx.addIssue({ code: 'custom', message: 'comma-separated id:base64key pairs, each key 32 bytes' });
          return z.NEVER;
        }
        keys[id] = buf;
      }
      return keys;
    }),
  PSEUDONYM_KEY: z.string().min(32, 'at least 32 characters'),
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(100).default(15000),
  PIPELINE_BATCH_ROWS: z.coerce.number().int().min(1).default(100000),
  PIPELINE_BATCH_MS: z.coerce.number().int().min(10).default(1000),
  /** The processors' output sinks (occupancy, connector health history): fewer, larger inserts (docs/pipeline.md). */
  PIPELINE_DERIVED_BATCH_MS: z.coerce.number().int().min(10).default(2000),
  RATE_LIMITS_ENABLED: bool.default(true),
  /** Where each process serves Prometheus metrics (its own port, not through the front door); port 0 turns it off. */
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  API_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9464),
  EDGE_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9465),
  PIPELINE_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9466),
  /**
   * TCP peers whose X-Forwarded-For is believed (its last entry is the client): the front door.
   * Loopback is the local stack's nginx; 172.16.0.0/12 and 192.168.0.0/16 are Docker's default
   * address pools, where the compose front door reaches the api (its port is not published).
   * Empty: believe no one. From any other peer the client is the socket's address.
   */
  TRUSTED_PROXIES: z
    .string()
    .default('127.0.0.1,::1,172.16.0.0/12,192.168.0.0/16')
    .transform((v, ctx) => {
      const entries = v
        .split(',')
        .map((e) => e.trim())
        .filter(Boolean);
      if (entries.every(isAddressOrBlock)) return entries;
      ctx.addIssue({ code: 'custom', message: 'comma-separated IP addresses or CIDR blocks (e.g. 127.0.0.1,::1,10.0.0.0/8), or empty' });
      return z.NEVER;
    }),
  /** Requests refused for a missing or bad key, per client address per minute, before such requests get 429 instead of 401. */
  UNAUTHENTICATED_RATE_LIMIT: z.coerce.number().int().min(1).default(300),
  /** Expensive reads (telemetry, dashboard, analytics) one operator may run at once on an api instance (docs/limits.md). */
  EXPENSIVE_QUERIES_PER_OPERATOR: z.coerce.number().int().min(1).default(2),
  /** Expensive reads running at once on an api instance, all operators together. */
  EXPENSIVE_QUERIES_PER_INSTANCE: z.coerce.number().int().min(1).default(6),
  /** Expensive reads of one operator waiting for a turn; past it the next is a 429 at once. */
  EXPENSIVE_QUERIES_MAX_WAITING: z.coerce.number().int().min(0).default(500),
  /** How long an expensive read may wait for its turn before it is refused (429, or 503 when everyone's queries fill the instance). */
  EXPENSIVE_QUERY_MAX_WAIT_MS: z.coerce.number().int().min(100).default(10_000),
  /** ClickHouse limits of every api read: run time, rows read, result size and memory of one query. */
  QUERY_MAX_EXECUTION_SECONDS: z.coerce.number().int().min(1).default(15),
  QUERY_MAX_ROWS_TO_READ: z.coerce.number().int().min(1000).default(300_000_000),
  QUERY_MAX_RESULT_BYTES: z.coerce
    .number()
    .int()
    .min(1024 * 1024)
    .default(64 * 1024 * 1024),
  QUERY_MAX_MEMORY_BYTES: z.coerce
    .number()
    .int()
    .min(64 * 1024 * 1024)
    .default(2 * 1024 * 1024 * 1024),
  /**
   * Sockets each process keeps to ClickHouse. A telemetry read holds one per key until its answer
   * is sent (up to 8), so the api's expensive reads alone can hold 48; with 10, cheap reads queued
   * behind them for a socket (docs/limits.md).
   */
  CLICKHOUSE_MAX_CONNECTIONS: z.coerce.number().int().min(2).max(1000).default(64),
  /** The largest JSON an MCP tool answers; a larger answer is a tool error asking for a narrower question. */
  MCP_MAX_RESULT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024),
  /** Concurrent /ws connections per operator, across every edge instance (spec: 10). */
  WS_MAX_CONNECTIONS_PER_OPERATOR: z.coerce.number().int().min(1).default(10),
  /** A connection whose unsent pushes exceed this many bytes is closed as a slow consumer (4108). */
  WS_MAX_BUFFERED_BYTES: z.coerce
    .number()
    .int()
    .min(16 * 1024)
    .default(1024 * 1024),
  /** Largest client message; a larger one is answered VALIDATION_ERROR, one above 4 times this drops the connection. */
  WS_MAX_MESSAGE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(16 * 1024 * 1024)
    .default(32 * 1024),
  /** Subscriptions one connection may hold at once. */
  WS_MAX_SUBSCRIPTIONS: z.coerce.number().int().min(1).default(100),
  /** Seconds without traffic before the edge pings; a connection that stays silent after the ping is closed. */
  WS_IDLE_TIMEOUT_S: z.coerce.number().int().min(8).max(960).default(32),
  /** How often the keys of live connections are re-checked, so a rotated key's sockets close within this. */
  WS_KEY_RECHECK_MS: z.coerce.number().int().min(100).default(5000),
  /** Life of a connection's lease in Redis, refreshed at a third of it; a crashed edge's leases lapse after it. */
  WS_LEASE_TTL_MS: z.coerce.number().int().min(1000).default(30000),
  /** How often the processors' wall-clock timers run (daily resets, connector silence). */
  PROCESSOR_TICK_MS: z.coerce.number().int().min(100).max(60_000).default(5000),
  /**
   * Pause between the derive job's rounds (visits and occupancy history recomputed from the raw
   * table). A round re-reads a minute of sightings before its new ones (the visit checkpoint's
   * margin), so shorter rounds re-read more: 30 s cost the soak about 9 % less CPU than 10 s
   * (benchmarks/README.md, "The derive job's interval").
   */
  DERIVE_INTERVAL_MS: z.coerce.number().int().min(100).max(600_000).default(30_000),
  /** A derive round starts no more venue periods after this long (each operator's first still runs); the rest carry over. */
  DERIVE_ROUND_BUDGET_MS: z.coerce.number().int().min(0).max(3_600_000).default(5_000),
  /** Whether the pipeline process runs the vendor pollers (UniFi, Verkada, Aruba ALE; docs/connectors/polling.md). */
  POLLERS_ENABLED: bool.default(true),
  /** Replaces the Verkada API host chosen by an integration's region: for tests and private proxies only. */
  VERKADA_API_BASE_URL: z.url({ protocol: /^https$/, error: 'an https:// URL' }).optional(),
});

/** REDIS_URL with REDIS_PASSWORD in it, unless the URL names a password of its own (which wins). */
function withRedisPassword(url: string, password: string): string {
  const u = new URL(url);
  if (!password || u.password) return url;
  u.password = password;
  return u.toString();
}

const withCredentials = configSchema.transform((c) => ({ ...c, REDIS_URL: withRedisPassword(c.REDIS_URL, c.REDIS_PASSWORD) }));

export type Config = z.infer<typeof withCredentials>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super('invalid configuration:\n' + problems.map((p) => '  ' + p).join('\n'));
    this.name = 'ConfigError';
  }
}

/** Parses KEY=value lines; quotes are optional, `#` starts a comment line. */
export function parseDotenv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    let value = line.slice(eq + 1).trim();
    if (/^(['"]).*\1$/.test(value)) value = value.slice(1, -1);
    out[line.slice(0, eq).trim()] = value;
  }
  return out;
}

/** Validates an environment; one line per bad variable, naming it and what was expected. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const result = withCredentials.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const name = String(issue.path[0] ?? '?');
    const given = env[name];
    const expected = given === undefined || given === '' ? 'required but not set' : issue.message;
    return `${name}: ${expected}`;
  });
  throw new ConfigError(problems);
}

let cached: Config | undefined;

/** The process's configuration: `.env` at the repo root under the real environment (which wins). */
export function config(): Config {
  if (cached) return cached;
  const file = repoPath('.env');
  const fromFile = existsSync(file) ? parseDotenv(readFileSync(file, 'utf8')) : {};
  cached = loadConfig({ ...fromFile, ...process.env });
  return cached;
}

/** For entry points: validate once at start-up, print the problems and exit 1 if any. */
export function configOrExit(): Config {
  try {
    return config();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(err.message + '\n');
      process.exit(1);
    }
    throw err;
  }
}
