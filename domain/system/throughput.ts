import type { Redis } from 'ioredis';
import { redisAnswer } from '../../lib/redis.js';

const WINDOW_MS = 60_000;
const keyFor = (minute: number) => `stats:accepted:${minute}`;

/**
 * Accepted-events counter per wall-clock minute, shared by every API instance through Redis.
 * Kept in process memory too, so the figure survives a Redis outage on this instance; every Redis
 * call is bounded (redisAnswer), so a hung Redis delays neither ingest nor /health.
 */
export class Throughput {
  private readonly local = new Map<number, number>();

  constructor(
    private readonly redis: Redis,
    private readonly now: () => number = Date.now,
  ) {}

  async record(count: number): Promise<void> {
    if (count <= 0) return;
    const minute = Math.floor(this.now() / WINDOW_MS);
    this.local.set(minute, (this.local.get(minute) ?? 0) + count);
    for (const m of this.local.keys()) if (m < minute - 1) this.local.delete(m);
    await redisAnswer(this.redis.multi().incrby(keyFor(minute), count).expire(keyFor(minute), 180).exec());
  }

  /** Events in the last 60 s: this minute plus the unexpired share of the previous one. */
  async perMinute(): Promise<number> {
    const now = this.now();
    const minute = Math.floor(now / WINDOW_MS);
    let current = this.local.get(minute) ?? 0;
    let previous = this.local.get(minute - 1) ?? 0;
    const shared = await redisAnswer(this.redis.mget(keyFor(minute), keyFor(minute - 1)));
    if (shared) {
      current = Number(shared[0] ?? 0);
      previous = Number(shared[1] ?? 0);
    }
    const elapsed = (now % WINDOW_MS) / WINDOW_MS;
    return Math.round(current + previous * (1 - elapsed));
  }
}
