import type { Context, Next } from 'koa';
import pg from 'pg';
import { z } from 'zod';
import { AppError, unavailable, type ErrorCode } from '../../../lib/errors.js';
import { fieldProblems } from '../../../lib/validate.js';

/** HTTP errors thrown by koa or the router (status → code); any other 4xx becomes a plain 400. */
const HTTP_CODES: Record<number, { code: ErrorCode; message: string }> = {
  400: { code: 'VALIDATION_ERROR', message: 'bad request' },
  404: { code: 'NOT_FOUND', message: 'route not found' },
  405: { code: 'METHOD_NOT_ALLOWED', message: 'method not allowed on this route' },
  413: { code: 'PAYLOAD_TOO_LARGE', message: 'request too large' },
  501: { code: 'METHOD_NOT_ALLOWED', message: 'method not implemented' },
};

/**
 * Postgres errors that can only come from input a route failed to validate (a malformed value, a
 * duplicate): a client error, not a 500. Logged at warn so the missing validation gets added.
 */
function fromPostgres(err: unknown): AppError | undefined {
  if (!(err instanceof pg.DatabaseError) || !err.code) return undefined;
  if (err.code.startsWith('22')) return new AppError(400, 'VALIDATION_ERROR', 'invalid input value', []);
  if (err.code === '23505') return new AppError(409, 'CONFLICT', 'a resource with these values already exists');
  return undefined;
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
  '57P01',
  '57P02',
  '57P03',
]);
// pg answers a query on a client whose connection already broke with the last of these.
const UNREACHABLE_MESSAGES =
  /Connection terminated|encountered a connection error and is not queryable|timeout exceeded when trying to connect|the database system is (starting up|shutting down)/;

/**
 * An engine that cannot be reached (Postgres or ClickHouse stopped or restarting, a connection cut):
 * the service is unavailable for a moment, not broken; the client retries after Retry-After.
 */
function engineUnreachable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message, cause } = err as { code?: unknown; message?: unknown; cause?: unknown };
  if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || (err instanceof pg.DatabaseError && code.startsWith('08')))) return true;
  if (typeof message === 'string' && UNREACHABLE_MESSAGES.test(message)) return true;
  return cause !== undefined && cause !== err && engineUnreachable(cause);
}

export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (engineUnreachable(err)) return unavailable('a storage engine is unreachable; retry after the number of seconds in Retry-After', 5);
  if (err instanceof z.ZodError) return new AppError(400, 'VALIDATION_ERROR', 'invalid input', fieldProblems(err));
  // http-errors (koa, the router) mark their errors with `expose`; other errors that merely carry a
  // `status` (e.g. from an engine's HTTP client) are not the client's fault.
  const http =
    typeof err === 'object' && err !== null && typeof (err as { expose?: unknown }).expose === 'boolean'
      ? (err as { status?: unknown; message?: string })
      : undefined;
  if (http && typeof http.status === 'number' && http.status >= 400 && http.status !== 500) {
    const known = HTTP_CODES[http.status];
    if (known) return new AppError(http.status, known.code, known.message);
    if (http.status < 500) return new AppError(400, 'VALIDATION_ERROR', http.message || 'bad request');
  }
  return fromPostgres(err) ?? new AppError(500, 'INTERNAL_ERROR', 'unexpected error; retry after a short delay');
}

/** The methods the router knows for the matched path, for a 405's `Allow` header. */
function allowedMethods(ctx: Context): string[] {
  const matched = (ctx as Context & { matched?: Array<{ methods: string[] }> }).matched ?? [];
  return [...new Set(matched.flatMap((layer) => layer.methods))];
}

/** Renders every error as the spec's envelope `{error, code, details?}`; logs only the unexpected. */
export async function errorEnvelope(ctx: Context, next: Next): Promise<void> {
  try {
    await next();
    // A transport that writes its own answer (MCP) sets `respond = false`.
    if (ctx.status === 404 && ctx.body === undefined && ctx.respond !== false)
      throw new AppError(404, 'NOT_FOUND', `no route for ${ctx.method} ${ctx.path}`);
  } catch (err) {
    let appErr = toAppError(err);
    if (appErr.status === 405) {
      const allowed = allowedMethods(ctx);
      appErr = new AppError(
        405,
        'METHOD_NOT_ALLOWED',
        `${ctx.method} is not allowed on ${ctx.path}; allowed: ${allowed.join(', ')}`,
        { allowed },
        { Allow: allowed.join(', ') },
      );
    }
    // A 501 is an unknown method: the client's doing, not a failure to log.
    if (appErr.status === 503 && !(err instanceof AppError)) ctx.state.log?.warn({ err }, 'engine unreachable; answered 503');
    else if (appErr.status >= 500 && appErr.status !== 501) ctx.state.log?.error({ err }, 'request failed');
    else if (err instanceof pg.DatabaseError) ctx.state.log?.warn({ err }, 'input reached Postgres unvalidated; validate it in the route');
    ctx.status = appErr.status;
    ctx.set(appErr.headers);
    ctx.body = appErr.toBody();
  }
}
