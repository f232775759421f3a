import type { Admin } from 'kafkajs';
import type { Redis } from 'ioredis';
import type { Ch } from '../../clickhouse/client.js';
import type { Logger } from '../../lib/logger.js';
import { withTimeout } from '../../lib/timers.js';
import type { Db } from '../../postgres/client.js';
import { pingDb, platformCounts } from '../../postgres/queries/system.js';
import type { Throughput } from './throughput.js';

export interface MemberHealth {
  connected: boolean;
  latencyMs: number;
  error?: string;
}

export interface Health {
  status: 'healthy' | 'degraded' | 'unhealthy';
  db: MemberHealth;
  redis: MemberHealth & { mode: 'shared' | 'local-fallback' };
  kafka: MemberHealth;
  clickhouse: MemberHealth;
  stats: { lastEventAt: string | null; operatorCount: number; venueCount: number; eventsPerMin: number };
  uptime: number;
}

/** The engines a health check probes (a process's services satisfy it). */
export interface Engines {
  db: Db;
  ch: Ch;
  redis: Redis;
  kafkaAdmin: Admin;
  log: Logger;
  startedAt: number;
}

const PROBE_TIMEOUT_MS = 2000;

async function probe(check: () => Promise<unknown>): Promise<MemberHealth> {
  const started = performance.now();
  try {
    await withTimeout(check(), PROBE_TIMEOUT_MS);
    return { connected: true, latencyMs: round(performance.now() - started) };
  } catch (err) {
    // The reason is part of the /health answer (for the operator reading it), not a log line.
    return { connected: false, latencyMs: round(performance.now() - started), error: (err as Error).message };
  }
}

const round = (ms: number) => Math.round(ms * 100) / 100;

/** Probes every engine in parallel with a real round trip; Postgres down means unhealthy. */
export async function getHealth(s: Engines, throughput: Throughput): Promise<Health> {
  const [db, redis, kafka, clickhouse] = await Promise.all([
    probe(() => pingDb(s.db)),
    probe(() => s.redis.ping()),
    probe(() => s.kafkaAdmin.describeCluster()),
    probe(async () => {
      const r = await s.ch.ping();
      if (!r.success) throw r.error;
    }),
  ]);
  const counts = db.connected
    ? await platformCounts(s.db).catch((err: unknown) => {
        s.log.warn({ err }, 'health: platform counts unavailable; reporting zeros');
        return undefined;
      })
    : undefined;
  const allUp = db.connected && redis.connected && kafka.connected && clickhouse.connected;
  return {
    status: !db.connected ? 'unhealthy' : allUp ? 'healthy' : 'degraded',
    db,
    redis: { ...redis, mode: redis.connected ? 'shared' : 'local-fallback' },
    kafka,
    clickhouse,
    stats: {
      lastEventAt: counts?.last_event_at ? counts.last_event_at.toISOString() : null,
      operatorCount: counts?.operator_count ?? 0,
      venueCount: counts?.venue_count ?? 0,
      eventsPerMin: await throughput.perMinute(),
    },
    uptime: Math.floor((Date.now() - s.startedAt) / 1000),
  };
}

export interface Status {
  status: 'operational' | 'degraded' | 'outage';
  eventsPerMin: number;
  venueCount: number;
  uptime: number;
  checkedAt: string;
}

/** The public subset: no engine names, latencies or errors. */
export function toStatus(h: Health): Status {
  return {
    status: h.status === 'healthy' ? 'operational' : h.status === 'degraded' ? 'degraded' : 'outage',
    eventsPerMin: h.stats.eventsPerMin,
    venueCount: h.stats.venueCount,
    uptime: h.uptime,
    checkedAt: new Date().toISOString(),
  };
}
