import { Redis } from 'ioredis';
import type { Config } from './config.js';

/** Fails fast while Redis is away (no offline queue) so callers can fall back instead of hanging. */
export function createRedis(cfg: Config): Redis {
  return new Redis(cfg.REDIS_URL, {
    keyPrefix: cfg.REDIS_KEY_PREFIX,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
}
