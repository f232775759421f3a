import { AsyncLocalStorage } from 'node:async_hooks';
import { Readable } from 'node:stream';
import {
  createClient,
  type ClickHouseClient,
  type ClickHouseSettings,
  type Logger as ChLogger,
  type LogParams,
  type WarnLogParams,
} from '@clickhouse/client';
import type { Config } from '../lib/config.js';
import type { Logger } from '../lib/logger.js';

export type Ch = ClickHouseClient;

/** The client would log to the console; its lines belong in the process's structured log. */
function loggerClass(log: Logger): new () => ChLogger {
  const chLog = log.child({ component: 'clickhouse-client' });
  const line = ({ module, message, args }: LogParams) => [{ module, ...args }, message] as const;
  return class implements ChLogger {
    trace = (p: LogParams) => chLog.trace(...line(p));
    debug = (p: LogParams) => chLog.debug(...line(p));
    info = (p: LogParams) => chLog.info(...line(p));
    warn = (p: WarnLogParams) => chLog.warn({ ...line(p)[0], err: p.err?.message }, p.message);
    error = (p: WarnLogParams) => chLog.error({ ...line(p)[0], err: p.err?.message }, p.message);
  };
}

/**
 * `requestTimeoutMs`: how long a statement may take before the client gives up on it (30 s; longer
 * for maintenance). `log`: where the client's own messages go (the console without it).
 */
export function createCh(
  cfg: Config,
  database: string | null = cfg.CLICKHOUSE_DATABASE,
  { requestTimeoutMs = 30_000, log }: { requestTimeoutMs?: number; log?: Logger } = {},
): Ch {
  const cluster = clusterConfig(cfg);
  const ch = createClient({
    url: cfg.CLICKHOUSE_URL,
    username: cfg.CLICKHOUSE_USER,
    password: cfg.CLICKHOUSE_PASSWORD,
    ...(database ? { database } : {}),
    request_timeout: requestTimeoutMs,
    // A long statement sends progress headers now and then, so no proxy in between takes the quiet
    // connection for idle and cuts it.
    ...(requestTimeoutMs > 60_000 || cluster
      ? {
          clickhouse_settings: {
            ...(requestTimeoutMs > 60_000 ? { send_progress_in_http_headers: 1 as const, http_headers_progress_interval_ms: '30000' } : {}),
            ...(cluster ? CLUSTER_SETTINGS : {}),
          },
        }
      : {}),
    // Gzip costs more CPU than it saves on a local network; turn it on for a distant server.
    compression: { request: false, response: cfg.CLICKHOUSE_COMPRESSION },
    max_open_connections: cfg.CLICKHOUSE_MAX_CONNECTIONS,
    ...(log ? { log: { LoggerClass: loggerClass(log) } } : {}),
  });
  if (cluster) clusters.set(ch, cluster);
  return ch;
}

/**
 * Cluster mode (CLICKHOUSE_CLUSTER set; docs/scaling.md#clickhouse): the service's tables are
 * `Distributed` tables in CLICKHOUSE_DATABASE over replicated tables of the same names in
 * `<database>_local` on every node. Queries and inserts name the tables as on one server.
 */
export interface ChCluster {
  /** The cluster's name in the servers' <remote_servers>. */
  name: string;
  /** Every node's HTTP URL (migrations and retention talk to each). */
  nodes: string[];
  /** The database of the replicated tables, for the Distributed database `database`. */
  localDatabase(database: string): string;
  /** A client of one node (`url`), same user and settings. */
  nodeClient(url: string, database: string | null, opts?: { requestTimeoutMs?: number; log?: Logger }): Ch;
}

/**
 * Sent with every statement in cluster mode, all known to 18.16 and current versions:
 * - `insert_distributed_sync`: an INSERT into a Distributed table returns once every shard's
 *   replica has stored its rows (otherwise they are queued on the receiving node and forwarded
 *   later), so the sink commits Kafka offsets only behind stored rows, as on one server.
 * - `load_balancing = in_order`: reads and writes of a shard go to its first live replica in
 *   <remote_servers> order (the local one first, `prefer_localhost_replica`), so a look-up after a
 *   write reads where the write went while that replica lives; a dead one is skipped after the
 *   connect timeout.
 * - `max_replica_delay_for_distributed_queries = 10`: a replica more than 10 s behind its
 *   replication log (one that was away and is catching up) is passed over for reads while another
 *   is current (300 s by default), so the sink's stored-position look-up after a failed write does
 *   not read a replica that misses what the other one took meanwhile.
 * - `distributed_product_mode = local`: an `IN (SELECT … FROM <distributed>)` inside a query of a
 *   Distributed table runs on each shard against that shard's local table (the default refuses
 *   it). Every table is sharded by venue, and every query filters by venue or operator, so a
 *   shard's subquery sees everything the shard's rows need (retention_classes, the rollups).
 */
export const CLUSTER_SETTINGS = {
  insert_distributed_sync: 1,
  load_balancing: 'in_order',
  max_replica_delay_for_distributed_queries: '10',
  distributed_product_mode: 'local',
} as const satisfies ClickHouseSettings;

const clusters = new WeakMap<object, ChCluster>();

export function clusterConfig(cfg: Config): ChCluster | undefined {
  if (!cfg.CLICKHOUSE_CLUSTER) return undefined;
  const nodes = cfg.CLICKHOUSE_CLUSTER_NODES.length ? cfg.CLICKHOUSE_CLUSTER_NODES : [cfg.CLICKHOUSE_URL];
  return {
    name: cfg.CLICKHOUSE_CLUSTER,
    nodes,
    localDatabase: (database) => `${database}_local`,
    nodeClient: (url, database, opts) => createCh({ ...cfg, CLICKHOUSE_URL: url }, database, opts),
  };
}

/** The cluster a client created by `createCh` belongs to; undefined on one server. */
export const clusterOf = (ch: Ch): ChCluster | undefined => clusters.get(ch);

/** The local (replicated) database behind the Distributed tables a cluster client reads. */
export async function localDatabaseOf(ch: Ch, cluster: ChCluster): Promise<string> {
  const [current] = await chRows<{ db: string }>(ch, raw('SELECT currentDatabase() AS db'));
  return cluster.localDatabase(current!.db);
}

/**
 * Settings for the statements sent within a call (`scopedSettings.run(settings, fn)`), added by a
 * `withSettings` client: a transport sets them per request without every query function passing them on.
 */
export const scopedSettings = new AsyncLocalStorage<ClickHouseSettings>();

/**
 * The same client (same connections), with `settings` and the scoped settings of the call added to
 * every statement it sends: a statement's own settings stay, but these win, so a caller cannot lift
 * a limit by accident.
 */
export function withSettings(ch: Ch, settings: ClickHouseSettings): Ch {
  const sent = new Set<PropertyKey>(['query', 'exec', 'command', 'insert']);
  const proxy = new Proxy(ch, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (!sent.has(prop) || typeof value !== 'function') return value;
      return (params: { clickhouse_settings?: ClickHouseSettings }) =>
        (value as (p: unknown) => unknown).call(target, {
          ...params,
          clickhouse_settings: { ...params.clickhouse_settings, ...settings, ...scopedSettings.getStore() },
        });
    },
  });
  const cluster = clusters.get(ch);
  if (cluster) clusters.set(proxy, cluster);
  return proxy;
}

/** Rows per INSERT body chunk are gathered up to this many characters. */
const INSERT_CHUNK_CHARS = 32 * 1024;

/** The rows as lines (`line` writes one, newline included) in chunks of about 32 KB, whole lines each. */
export function* lineChunks<T>(rows: readonly T[], line: (row: T) => string): Generator<Buffer> {
  let text = '';
  for (const row of rows) {
    text += line(row);
    if (text.length >= INSERT_CHUNK_CHARS) {
      yield Buffer.from(text);
      text = '';
    }
  }
  if (text) yield Buffer.from(text);
}

const jsonLine = (row: object): string => `${JSON.stringify(row)}\n`;

/** JSONEachRow text in chunks of about 32 KB, whole rows each. */
export const jsonEachRowChunks = (rows: readonly object[]): Generator<Buffer> => lineChunks(rows, jsonLine);

/**
 * One INSERT whose body is streamed in the chunks given. The client's own insert joins every row
 * of a batch into one string first: thousands of rows make a string and a buffer of megabytes,
 * which V8 and the allocator each place (and page-fault) on their own. Chunks stay small enough to
 * avoid that (figures: benchmarks/README.md#benchingest).
 */
async function insertBody(ch: Ch, query: string, body: Iterable<Buffer>): Promise<void> {
  const { stream } = await ch.exec({ query, values: Readable.from(body, { objectMode: false }) });
  // The answer to an INSERT is empty; reading it to the end returns the connection to the pool.
  for await (const _ of stream) void _;
}

/** One INSERT of `rows` into `table` as JSONEachRow. */
export async function insertRows(ch: Ch, table: string, rows: readonly object[]): Promise<void> {
  if (rows.length === 0) return;
  await insertBody(ch, `INSERT INTO ${table} FORMAT JSONEachRow`, jsonEachRowChunks(rows));
}

/**
 * A String field of a TabSeparated row: backslash, tab and line breaks escaped, the rest as is.
 * Four `indexOf` scans cost less than one scan by a character class (40 against 110 ns for a
 * 200-character payload; benchmarks/README.md, "Identifiers checked by table").
 */
export function tsvString(value: string): string {
  return value.indexOf('\\') < 0 && value.indexOf('\t') < 0 && value.indexOf('\n') < 0 && value.indexOf('\r') < 0
    ? value
    : value.replace(/[\\\t\n\r]/g, (c) => TSV_ESCAPES[c]!);
}

const TSV_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** The escapes ClickHouse writes in a TabSeparated String field, and what each stands for. */
const TSV_UNESCAPES: Record<string, string> = { b: '\b', f: '\f', r: '\r', n: '\n', t: '\t', '0': '\0', "'": "'", '\\': '\\' };

/** A String field of a TabSeparated answer as the value it holds: the inverse of `tsvString`, and of ClickHouse's own escapes. */
export function tsvField(field: string): string {
  return field.indexOf('\\') < 0 ? field : field.replace(/\\(.)/g, (_, c: string) => TSV_UNESCAPES[c] ?? c);
}

/** A numeric field of a TabSeparated answer: `\N` (NULL) and `nan` (an aggregate of no value) as null. */
export const tsvNumber = (field: string): number | null => (field === '\\N' || field === 'nan' ? null : Number(field));

/** An Array(String) field of a TabSeparated row: `['a','b']`, each element quoted and escaped. */
export function tsvStringArray(values: readonly string[]): string {
  let out = '[';
  for (let i = 0; i < values.length; i++) {
    const v = tsvString(values[i]!);
    out += `${i === 0 ? '' : ','}'${v.indexOf("'") < 0 ? v : v.replace(/'/g, "\\'")}'`;
  }
  return `${out}]`;
}

/**
 * One INSERT of `rows` into `table` as TabSeparated, `line` writing one row in `columns` order:
 * no column name repeated per row, as JSONEachRow does
 * (benchmarks/README.md#raw-events-into-clickhouse-as-tabseparated-2026-11-27-issue-30).
 */
export async function insertTsv<T>(
  ch: Ch,
  table: string,
  columns: readonly string[],
  rows: readonly T[],
  line: (row: T) => string,
): Promise<void> {
  if (rows.length === 0) return;
  await insertBody(ch, `INSERT INTO ${table} (${columns.join(', ')}) FORMAT TabSeparated`, lineChunks(rows, line));
}

/**
 * A rendered statement. ClickHouse 18.16 has no query parameters, so `chsql` renders validated
 * values as escaped literals; this is the only place that turns a value into SQL text.
 */
export class ChSql {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

/** Marks a trusted identifier or fragment (never user input) for inclusion as-is. */
export const raw = (text: string): ChSql => new ChSql(text);

export function literal(value: unknown): string {
  if (value instanceof ChSql) return value.text;
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`cannot render ${value} as a ClickHouse literal`);
    return String(value);
  }
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'boolean') return value ? '1' : '0';
  if (value instanceof Date) return `toDateTime(${Math.floor(value.getTime() / 1000)}, 'UTC')`;
  if (Array.isArray(value)) return `[${value.map(literal).join(', ')}]`;
  if (typeof value === 'string') return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  throw new TypeError(`cannot render a ${typeof value} as a ClickHouse literal`);
}

export function chsql(strings: TemplateStringsArray, ...values: unknown[]): ChSql {
  let text = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) text += literal(values[i]) + (strings[i + 1] ?? '');
  return new ChSql(text);
}

export async function chRows<T>(ch: Ch, statement: ChSql): Promise<T[]> {
  const result = await ch.query({ query: statement.text, format: 'JSONEachRow' });
  return (await result.json()) as T[];
}

export async function chExec(ch: Ch, statement: ChSql | string): Promise<void> {
  await ch.command({ query: typeof statement === 'string' ? statement : statement.text });
}

/**
 * Rows as TabSeparated text, each given to `row` as it is cut: for large answers (telemetry series,
 * the derive job's inputs) this parses several times faster than JSONEachRow. Fields are strings
 * as ClickHouse wrote them (`\N` = NULL; a String field through `tsvField`).
 */
export async function chTsvRows<T>(
  ch: Ch,
  statement: ChSql,
  row: (fields: readonly string[]) => T,
  settings?: ClickHouseSettings,
): Promise<T[]> {
  const result = await ch.query({ query: statement.text, format: 'TabSeparated', ...(settings ? { clickhouse_settings: settings } : {}) });
  return tsvRows(await result.text(), row);
}

/**
 * A TabSeparated text's rows through `row`, in one pass: no string per line and no array per row
 * (0.7 against 1.2 µs for a 7-field row split by line, then by tab). `fields` is reused for the
 * next row: `row` reads it, never keeps it.
 */
export function tsvRows<T>(text: string, row: (fields: readonly string[]) => T): T[] {
  const out: T[] = [];
  const fields: string[] = [];
  const end = text.length;
  // The next tab is kept across lines: a line without one (a one-column answer) never scans the rest of the text.
  let tab = text.indexOf('\t');
  for (let start = 0; start < end;) {
    let nl = text.indexOf('\n', start);
    if (nl < 0) nl = end;
    fields.length = 0;
    let from = start;
    for (; tab >= 0 && tab < nl; tab = text.indexOf('\t', from)) {
      fields.push(text.slice(from, tab));
      from = tab + 1;
    }
    fields.push(text.slice(from, nl));
    out.push(row(fields));
    start = nl + 1;
  }
  return out;
}
