import type { Context } from 'koa';
import { authenticate, verifyAdminSecret, type Operator } from '../../../domain/tenants/operators.js';
import { rateLimited, type RateLimiter } from '../../../domain/limits/rate-limit.js';
import { AppError, unauthorized } from '../../../lib/errors.js';
import type { Db } from '../../../postgres/client.js';

export function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match?.[1];
}

/** Resolves `Authorization: Bearer <key>` to the operator and the key it presented. */
export async function bearerAuth(db: Db, ctx: Context): Promise<{ operator: Operator; apiKey: string }> {
  try {
    const header = ctx.get('authorization');
    const key = bearerToken(header);
    if (header && !key) throw unauthorized('malformed Authorization header; expected "Bearer <API_KEY>"');
    return { operator: await authenticate(db, key), apiKey: key! };
  } catch (err) {
    // RFC 9110: a 401 names the scheme the client should use.
    if (err instanceof AppError && err.status === 401)
      throw new AppError(401, err.code, err.message, err.details, { 'WWW-Authenticate': 'Bearer realm="venue-telemetry"' });
    throw err;
  }
}

export function adminAuth(secret: string, ctx: Context): void {
  verifyAdminSecret(secret, ctx.get('x-admin-key') || undefined);
}

/**
 * Runs an authentication step; a refusal counts against the client address's budget of
 * unauthenticated requests, and past it the answer is 429 with Retry-After instead of 401, so
 * key guessing and anonymous floods are slowed down on every instance alike (counted in Redis).
 */
export async function limitingFailures<T>(limiter: RateLimiter | undefined, ctx: Context, step: () => T | Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (!limiter || !(err instanceof AppError) || err.status !== 401) throw err;
    const decision = await limiter.hit(ctx.ip || 'unknown', 'unauthenticated');
    if (!decision.allowed) throw rateLimited(decision, 'unauthenticated');
    throw err;
  }
}
