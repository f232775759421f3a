import type { Redis } from 'ioredis';
import { redisAnswer } from '../../lib/redis.js';
import type { Logger } from '../../lib/logger.js';

/** Spec: concurrent WebSocket connections per operator. */
export const WS_CONNECTIONS_PER_OPERATOR = 10;

export interface LeaseDecision {
  allowed: boolean;
  /** Connections of the operator counted, this one included when allowed. */
  count: number;
  limit: number;
  /** `shared`: counted in Redis across every edge; `local-fallback`: Redis unreachable, counted in this process. */
  mode: 'shared' | 'local-fallback';
}

// One sorted set per operator: member = lease id, score = expiry (Redis clock, ms). Expired
// leases are pruned before counting, so a crashed edge's connections stop counting after the TTL.
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[3]) then return {0, n} end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, n + 1}`;

// KEYS[i] is the set of the lease ARGV[i + 1]. A lease lost while Redis was away is added back:
// its connection is real and must count.
const REFRESH = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + ttl, ARGV[i + 1])
  redis.call('PEXPIRE', key, ttl)
end
return #KEYS`;

const REFRESH_CHUNK = 500;

export interface ConnectionLeasesOptions {
  limit?: number;
  ttlMs: number;
  log: Logger;
}

/**
 * Per-operator connection leases shared by every edge instance. Each open connection holds one
 * lease, refreshed by its edge; closing releases it, and an edge that dies stops refreshing, so
 * its leases lapse after the TTL and never lock an operator out. While Redis is unreachable the
 * limit is enforced per edge instance, in memory (dashboards stay up; the shared count resumes,
 * with these leases added back, once Redis answers).
 */
export class ConnectionLeases {
  private readonly limit: number;
  private readonly ttlMs: number;
  private readonly log: Logger;
  /** Every lease this process holds: lease id → operator. */
  private readonly held = new Map<string, string>();

  constructor(
    private readonly redis: Redis,
    opts: ConnectionLeasesOptions,
  ) {
    this.limit = opts.limit ?? WS_CONNECTIONS_PER_OPERATOR;
    this.ttlMs = opts.ttlMs;
    this.log = opts.log;
  }

  private key(operatorId: string): string {
    return `ws:conns:${operatorId}`;
  }

  async acquire(operatorId: string, leaseId: string): Promise<LeaseDecision> {
    const shared =
      this.redis.status === 'ready'
        ? await redisAnswer(this.redis.eval(ACQUIRE, 1, this.key(operatorId), leaseId, this.ttlMs, this.limit) as Promise<[number, number]>)
        : undefined;
    if (shared) {
      const [ok, count] = shared;
      if (ok === 1) this.held.set(leaseId, operatorId);
      return { allowed: ok === 1, count, limit: this.limit, mode: 'shared' };
    }
    this.log.warn({ operatorId }, 'redis unavailable: connection limit enforced per edge instance');
    let count = 0;
    for (const op of this.held.values()) if (op === operatorId) count++;
    if (count >= this.limit) return { allowed: false, count, limit: this.limit, mode: 'local-fallback' };
    this.held.set(leaseId, operatorId);
    return { allowed: true, count: count + 1, limit: this.limit, mode: 'local-fallback' };
  }

  async release(leaseId: string): Promise<void> {
    const operatorId = this.held.get(leaseId);
    if (!operatorId) return;
    this.held.delete(leaseId);
    const done = this.redis.status === 'ready' ? await redisAnswer(this.redis.zrem(this.key(operatorId), leaseId)) : undefined;
    if (done === undefined) this.log.warn({ operatorId }, 'could not release a connection lease in Redis; it lapses after its TTL');
  }

  /** Extends every lease this process holds; called at a third of the TTL. */
  async refresh(): Promise<void> {
    if (this.held.size === 0) return;
    if (this.redis.status !== 'ready') {
      this.log.warn({ leases: this.held.size }, 'redis unavailable: connection leases not refreshed');
      return;
    }
    const ids = [...this.held.keys()];
    for (let i = 0; i < ids.length; i += REFRESH_CHUNK) {
      // Read from `held` right before sending: a lease released while an earlier chunk was in
      // flight must not be written back (its ZREM is already queued ahead of this script).
      const chunk = ids.slice(i, i + REFRESH_CHUNK).flatMap((id) => {
        const op = this.held.get(id);
        return op ? [[id, op] as const] : [];
      });
      if (chunk.length === 0) continue;
      const keys = chunk.map(([, op]) => this.key(op));
      const ok = await redisAnswer(this.redis.eval(REFRESH, keys.length, ...keys, this.ttlMs, ...chunk.map(([id]) => id)), 2000);
      if (ok === undefined) {
        this.log.warn({ leases: chunk.length }, 'redis did not answer: connection leases not refreshed');
        return;
      }
    }
  }

  get size(): number {
    return this.held.size;
  }
}
