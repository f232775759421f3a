import type { Context, Next } from 'koa';
import type { Redis } from 'ioredis';
import { RateLimiter, rateLimitHeaders, rateLimited, type RateBucket } from '../../../domain/limits/rate-limit.js';

// One limiter per API instance, keyed by its Redis client: the in-memory fallback counts belong to
// the instance, even when tests run two instances in one process.
const limiters = new WeakMap<Redis, RateLimiter>();

export function limiterFor(redis: Redis): RateLimiter {
  let limiter = limiters.get(redis);
  if (!limiter) {
    limiter = new RateLimiter(redis);
    limiters.set(redis, limiter);
  }
  return limiter;
}

/** POST /ingest has its own, smaller bucket; everything else authenticated shares the other. */
export const bucketFor = (path: string): RateBucket => (path.toLowerCase().replace(/\/+$/, '') === '/ingest' ? 'ingest' : 'api');

/** Per-operator limit; runs after authentication, so public endpoints are never limited. */
export function rateLimit(limiter: RateLimiter) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const bucket = bucketFor(ctx.path);
    const decision = await limiter.hit(ctx.state.operator.id, bucket);
    if (!decision.allowed) throw rateLimited(decision, bucket);
    // Set before the handler runs, so error responses carry the headers too.
    ctx.set(rateLimitHeaders(decision));
    await next();
  };
}
