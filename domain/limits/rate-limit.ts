import type { Redis } from 'ioredis';
import { AppError } from '../../lib/errors.js';
import { redisAnswer } from '../../lib/redis.js';

/**
 * `ingest` is POST /ingest; `api` is the rest of the authenticated surface; both per operator.
 * `unauthenticated` counts requests refused for a missing or bad key, per client address.
 */
export type RateBucket = 'ingest' | 'api' | 'unauthenticated';

/** The spec's requests per operator per window, the same on every plan. */
export const RATE_LIMITS: Readonly<Record<'ingest' | 'api', number>> = { ingest: 100, api: 1000 };
/** Failed authentications per client address per window, unless configured otherwise. */
export const DEFAULT_UNAUTHENTICATED_LIMIT = 300;
const RATE_WINDOW_MS = 60_000;

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Whole seconds until the current window ends, at least 1. */
  resetSeconds: number;
  /** `shared`: counted in Redis, one limit across all instances; `local-fallback`: Redis unreachable, counted in this process. */
  mode: 'shared' | 'local-fallback';
}

export interface RateLimiterOptions {
  limits?: Partial<Readonly<Record<RateBucket, number>>>;
  now?: () => number;
}

/**
 * Fixed 60 s windows aligned to the epoch minute, per operator and bucket. The counter lives in
 * Redis (INCRBY + PEXPIRE in one MULTI, so it is atomic and shared by every API instance); while
 * Redis is unreachable each instance counts in memory over the same windows.
 */
export class RateLimiter {
  private readonly limits: Readonly<Record<RateBucket, number>>;
  private readonly now: () => number;
  private local = new Map<string, number>();
  private localWindow = -1;
  /** Keys (by digest) refused over their operator's limit in the current window. */
  private closed = new Map<string, number>();
  private closedWindow = -1;

  constructor(
    private readonly redis: Redis,
    opts: RateLimiterOptions = {},
  ) {
    this.limits = { ...RATE_LIMITS, unauthenticated: DEFAULT_UNAUTHENTICATED_LIMIT, ...opts.limits };
    this.now = opts.now ?? Date.now;
  }

  /**
   * Counts `requests` requests of `subject` (an operator id, or a client address), e.g. the messages
   * of an MCP batch: refused ones too, so a client hammering a closed window stays refused.
   */
  async hit(subject: string, bucket: RateBucket, requests = 1): Promise<RateDecision> {
    const now = this.now();
    const window = Math.floor(now / RATE_WINDOW_MS);
    const key = `rl:${bucket}:${subject}:${window}`;
    const shared = await this.incrShared(key, requests);
    const count = shared ?? this.incrLocal(key, window, requests);
    const limit = this.limits[bucket];
    return {
      allowed: count <= limit,
      limit,
      remaining: Math.max(0, limit - count),
      resetSeconds: Math.max(1, Math.ceil(((window + 1) * RATE_WINDOW_MS - now) / 1000)),
      mode: shared === undefined ? 'local-fallback' : 'shared',
    };
  }

  /** Whether any key was refused in the current window: only then is a key worth looking up (see `refusedEarlier`). */
  refusing(): boolean {
    this.forgetPastWindows();
    return this.closed.size > 0;
  }

  /**
   * The refusal again of a key already refused over its operator's limit in this window, from
   * memory: no key lookup, no Redis round trip, so a client hammering a closed window costs next to
   * nothing. `undefined` when the key has no such refusal (it then goes the usual way).
   */
  refusedEarlier(keyDigest: string, bucket: RateBucket): RateDecision | undefined {
    this.forgetPastWindows();
    const limit = this.closed.get(`${bucket}:${keyDigest}`);
    if (limit === undefined) return undefined;
    const now = this.now();
    const resetSeconds = Math.max(1, Math.ceil(((this.closedWindow + 1) * RATE_WINDOW_MS - now) / 1000));
    return { allowed: false, limit, remaining: 0, resetSeconds, mode: 'shared' };
  }

  /** Remembers a key refused by `hit` until its window ends (see `refusedEarlier`). */
  noteRefused(keyDigest: string, bucket: RateBucket): void {
    this.forgetPastWindows();
    this.closed.set(`${bucket}:${keyDigest}`, this.limits[bucket]);
  }

  /** Refusals belong to their window: a new window starts with none. */
  private forgetPastWindows(): void {
    const window = Math.floor(this.now() / RATE_WINDOW_MS);
    if (window === this.closedWindow) return;
    this.closed.clear();
    this.closedWindow = window;
  }

  private async incrShared(key: string, by: number): Promise<number | undefined> {
    // ioredis has no offline queue here: while disconnected, skip the round trip altogether.
    if (this.redis.status !== 'ready') return undefined;
    const result = await redisAnswer(
      this.redis
        .multi()
        .incrby(key, by)
        .pexpire(key, 2 * RATE_WINDOW_MS)
        .exec(),
    );
    const [err, value] = result?.[0] ?? [];
    return err || typeof value !== 'number' ? undefined : value;
  }

  private incrLocal(key: string, window: number, by: number): number {
    // Only the current window matters: drop the previous ones wholesale.
    if (window !== this.localWindow) {
      this.local = new Map();
      this.localWindow = window;
    }
    const count = (this.local.get(key) ?? 0) + by;
    this.local.set(key, count);
    return count;
  }
}

/** The standard rate-limit headers (IETF draft names), sent on every limited response. */
export function rateLimitHeaders(d: RateDecision): Record<string, string> {
  return {
    'RateLimit-Limit': String(d.limit),
    'RateLimit-Remaining': String(d.remaining),
    'RateLimit-Reset': String(d.resetSeconds),
  };
}

export function rateLimited(d: RateDecision, bucket: RateBucket): AppError {
  return new AppError(
    429,
    'RATE_LIMITED',
    bucket === 'unauthenticated'
      ? `too many requests without a valid API key from this address (${d.limit} per minute); retry in ${d.resetSeconds} s with a valid key`
      : `rate limit of ${d.limit} ${bucket === 'ingest' ? 'ingest ' : ''}requests per minute reached for this operator; retry in ${d.resetSeconds} s`,
    { limit: d.limit, windowSeconds: RATE_WINDOW_MS / 1000, retryAfter: d.resetSeconds },
    { ...rateLimitHeaders(d), 'Retry-After': String(d.resetSeconds) },
  );
}
