import { AsyncLocalStorage } from 'node:async_hooks';
import { Readable } from 'node:stream';
import { createClient, type ClickHouseClient, type ClickHouseSettings, type Logger as ChLogger, type LogParams, type WarnLogParams } from '@clickhouse/client';
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
  return createClient({
    url: cfg.CLICKHOUSE_URL,
    username: cfg.CLICKHOUSE_USER,
    password: cfg.CLICKHOUSE_PASSWORD,
    ...(database ? { database } : {}),
    request_timeout: requestTimeoutMs,
    // A long statement sends progress headers now and then, so no proxy in between takes the quiet
    // connection for idle and cuts it.
    ...(requestTimeoutMs > 60_000 ? { clickhouse_settings: { send_progress_in_http_headers: 1, http_headers_progress_interval_ms: '30000' } } : {}),
    // Gzip costs more CPU than it saves on a local network; turn it on for a distant server.
    compression: { request: false, response: cfg.CLICKHOUSE_COMPRESSION },
    max_open_connections: cfg.CLICKHOUSE_MAX_CONNECTIONS,
    ...(log ? { log: { LoggerClass: loggerClass(log) } } : {}),
  });
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
  return new Proxy(ch, {
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
 * which V8 and the allocator each place (and page-fault) on their own; encoding in chunks costs
 * less than half (benchmarks/README.md).
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

/** A String field of a TabSeparated row: backslash, tab and line breaks escaped, the rest as is. */
export function tsvString(value: string): string {
  return /[\\\t\n\r]/.test(value) ? value.replace(/[\\\t\n\r]/g, (c) => TSV_ESCAPES[c]!) : value;
}

const TSV_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** An Array(String) field of a TabSeparated row: `['a','b']`, each element quoted and escaped. */
export function tsvStringArray(values: readonly string[]): string {
  let out = '[';
  for (let i = 0; i < values.length; i++) out += `${i === 0 ? '' : ','}'${tsvString(values[i]!).replace(/'/g, "\\'")}'`;
  return `${out}]`;
}

/**
 * One INSERT of `rows` into `table` as TabSeparated, `line` writing one row in `columns` order:
 * no column name repeated per row, as JSONEachRow does (benchmarks/README.md, bench:insert-format).
 */
export async function insertTsv<T>(ch: Ch, table: string, columns: readonly string[], rows: readonly T[], line: (row: T) => string): Promise<void> {
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
 * Rows as TabSeparated text, split here: for large numeric answers (telemetry series) this parses
 * several times faster than JSONEachRow. Fields are strings as ClickHouse wrote them (`\N` = NULL).
 */
export async function chTsvRows(ch: Ch, statement: ChSql, settings?: ClickHouseSettings): Promise<string[][]> {
  const result = await ch.query({ query: statement.text, format: 'TabSeparated', ...(settings ? { clickhouse_settings: settings } : {}) });
  const text = await result.text();
  if (text === '') return [];
  return text.slice(0, text.endsWith('\n') ? -1 : undefined).split('\n').map((line) => line.split('\t'));
}
