import type { ClickHouseSettings } from '@clickhouse/client';
import { AppError } from '../../lib/errors.js';
import type { Config } from '../../lib/config.js';

/**
 * ClickHouse priorities (smaller runs first; 0, the sink's inserts, is outside the scheme): a large
 * read is paused while any normal one runs, so a long range at a fine resolution cannot hold up a
 * dashboard's chart; the derive job's statements while any api read runs.
 */
const PRIORITY = { normal: 1, large: 2, background: 3 } as const;

/**
 * ClickHouse settings of a large read's statements: the lower priority on one thread, so however
 * long it runs it holds at most one core, and yields that to smaller reads.
 */
export const LARGE_READ_SETTINGS: ClickHouseSettings = { priority: String(PRIORITY.large), max_threads: 1 };

/**
 * ClickHouse settings of the derive job's statements (pipeline/derive/): after every api read, on
 * one thread, so recomputing history, however large the day, takes at most one core from the
 * sink's inserts and the merges, and none from a dashboard.
 */
export const BACKGROUND_SETTINGS: ClickHouseSettings = { priority: String(PRIORITY.background), max_threads: 1 };

/** Telemetry buckets (keys × buckets) above which a read is large. */
export const LARGE_READ_POINTS = 10_000;
export const isLargeRead = (points: number): boolean => points > LARGE_READ_POINTS;

/** Ranges of dashboard and analytics reads that make them large. */
export const LONG_RANGES: ReadonlySet<string> = new Set(['30d', '90d']);

/** ClickHouse's own limits on one api read, from the configuration (docs/limits.md). */
export function readLimits(cfg: Config): ClickHouseSettings {
  return {
    priority: String(PRIORITY.normal),
    max_execution_time: cfg.QUERY_MAX_EXECUTION_SECONDS,
    // UInt64 settings travel as strings (the client's types say so).
    max_rows_to_read: String(cfg.QUERY_MAX_ROWS_TO_READ),
    max_result_bytes: String(cfg.QUERY_MAX_RESULT_BYTES),
    max_memory_usage: String(cfg.QUERY_MAX_MEMORY_BYTES),
  };
}

/** ClickHouse error codes of a query stopped by one of `readLimits` (the same in 18.16 and current). */
const LIMIT_CODES: Record<string, string> = {
  '158': 'rows read',
  '159': 'run time',
  '241': 'memory',
  '307': 'bytes read',
  '396': 'result size',
};

/** The client parses current servers' errors into `code`; 18.16's form it leaves in the message. */
function clickhouseCode(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : /^Code: (\d+)/.exec(err.message)?.[1];
}

/** Seconds a client waits before retrying a query that hit a limit: the load it met may have passed. */
const RETRY_AFTER_SECONDS = 5;

/**
 * A read stopped by a per-query limit, as the answer a client can act on (503 with Retry-After:
 * the same question may pass when the server is quieter; a narrower one passes sooner); any other
 * error unchanged.
 */
export function queryLimitError(err: unknown): unknown {
  const limit = LIMIT_CODES[clickhouseCode(err) ?? ''];
  if (!limit) return err;
  return new AppError(
    503,
    'SERVICE_UNAVAILABLE',
    `the query went over the per-query ${limit} limit; ask for a shorter range, fewer keys or a coarser interval, or retry in ${RETRY_AFTER_SECONDS} s`,
    { limit, retryAfter: RETRY_AFTER_SECONDS },
    { 'Retry-After': String(RETRY_AFTER_SECONDS) },
  );
}
