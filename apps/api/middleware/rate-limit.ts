import type { Context } from 'koa';
import type { Redis } from 'ioredis';
import { hashApiKey } from '../../../domain/tenants/api-keys.js';
import { rateLimitHeaders, rateLimited, RateLimiter, type RateBucket } from '../../../domain/limits/rate-limit.js';
import type { Config } from '../../../lib/config.js';
import { bearerToken } from './auth.js';

// One limiter per API instance, keyed by its Redis client: the in-memory fallback counts belong to
// the instance, even when tests run two instances in one process.
const limiters = new WeakMap<Redis, RateLimiter>();

export function limiterFor(redis: Redis, cfg: Pick<Config, 'UNAUTHENTICATED_RATE_LIMIT'>): RateLimiter {
  let limiter = limiters.get(redis);
  if (!limiter) {
    limiter = new RateLimiter(redis, { limits: { unauthenticated: cfg.UNAUTHENTICATED_RATE_LIMIT } });
    limiters.set(redis, limiter);
  }
  return limiter;
}

const digestOf = (key: string): string => hashApiKey(key).toString('base64');

/**
 * Before authentication: a key already refused over its operator's limit in this window is refused
 * again at once (429 with Retry-After), without a key lookup or a Redis round trip.
 */
export function refuseKnownOverLimit(limiter: RateLimiter | undefined, ctx: Context, bucket: RateBucket): void {
  // The usual case, no refusal this window, costs no hashing.
  if (!limiter?.refusing()) return;
  const key = bearerToken(ctx.get('authorization'));
  const decision = key ? limiter.refusedEarlier(digestOf(key), bucket) : undefined;
  if (decision) throw rateLimited(decision, bucket);
}

/** Counts `requests` of the authenticated operator; past the limit, 429 (and the key is remembered as refused). */
export async function countRequests(
  limiter: RateLimiter,
  ctx: Context,
  who: { operatorId: string; apiKey: string },
  bucket: RateBucket,
  requests = 1,
): Promise<void> {
  const decision = await limiter.hit(who.operatorId, bucket, requests);
  if (!decision.allowed) {
    limiter.noteRefused(digestOf(who.apiKey), bucket);
    throw rateLimited(decision, bucket);
  }
  // Set before the handler runs, so error responses carry the headers too.
  ctx.set(rateLimitHeaders(decision));
}
