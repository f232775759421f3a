import type { Redis } from 'ioredis';
import { RateLimiter } from '../../../domain/limits/rate-limit.js';
import type { Config } from '../../../lib/config.js';

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
