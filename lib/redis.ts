import { Redis } from 'ioredis';
import type { Config } from './config.js';
import { withTimeout } from './timers.js';

/** A Redis answer slower than this counts as Redis being away, so a hung Redis never hangs a request. */
export const REDIS_ANSWER_MS = 500;

/** The command's answer, or undefined when it fails or takes longer than `ms`. */
export async function redisAnswer<T>(command: Promise<T>, ms = REDIS_ANSWER_MS): Promise<T | undefined> {
  return withTimeout(command, ms).catch(() => undefined);
}

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
