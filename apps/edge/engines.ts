import type { Kafka } from 'kafkajs';
import type { Redis } from 'ioredis';
import type { Config } from '../../lib/config.js';
import type { Logger } from '../../lib/logger.js';
import { createKafka } from '../../lib/kafka.js';
import { createRedis } from '../../lib/redis.js';
import { createDb, type Db } from '../../postgres/client.js';

/** The engines the edge talks to: keys and venues in Postgres, connection leases in Redis, the streams in Kafka. */
export interface EdgeEngines {
  db: Db;
  redis: Redis;
  kafka: Kafka;
}

/** Creates the edge's engines; Redis being away at start-up is not fatal (leases are then counted per instance). */
export async function createEdgeEngines(cfg: Config, log: Logger): Promise<EdgeEngines> {
  const db = createDb(cfg, 4, log);
  const redis = createRedis(cfg);
  redis.on('error', (err) => log.debug({ err }, 'redis error'));
  await redis
    .connect()
    .catch((err: unknown) => log.warn({ err }, 'redis unavailable at start-up; connection limit counted per instance until it answers'));
  return { db, redis, kafka: createKafka(cfg, log, `${cfg.KAFKA_CLIENT_ID}-edge`) };
}

/** The edge's Kafka clients are its consumers, stopped before this: only Redis and Postgres are left. */
export async function closeEdgeEngines(engines: EdgeEngines): Promise<void> {
  engines.redis.disconnect();
  await engines.db.end();
}
