import type { Kafka, Producer, Admin } from 'kafkajs';
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import { createKafka, createProducer, ensureTopics, topicsFor } from './kafka.js';
import { createRedis } from './redis.js';
import { createDb, type Db } from '../postgres/client.js';
import { createCh, type Ch } from '../clickhouse/client.js';
import type { Topics } from './events.js';

/** The engines a process talks to, created once at start-up and closed in order at shutdown. */
export interface Services {
  cfg: Config;
  log: Logger;
  db: Db;
  ch: Ch;
  redis: Redis;
  kafka: Kafka;
  kafkaAdmin: Admin;
  producer: Producer;
  topics: Topics;
  startedAt: number;
}

export async function createServices(cfg: Config, log: Logger, opts: { dbPoolSize?: number } = {}): Promise<Services> {
  const kafka = createKafka(cfg, log);
  const services: Services = {
    cfg,
    log,
    db: createDb(cfg, opts.dbPoolSize),
    ch: createCh(cfg),
    redis: createRedis(cfg),
    kafka,
    kafkaAdmin: kafka.admin(),
    producer: createProducer(kafka),
    topics: topicsFor(cfg),
    startedAt: Date.now(),
  };
  // Redis is optional at run time (rate limits fall back to per-instance counting), so a failed
  // first connect is logged, not fatal; ioredis keeps retrying in the background.
  services.redis.on('error', (err) => log.debug({ err: err.message }, 'redis error'));
  await services.redis.connect().catch((err: Error) => log.warn({ err: err.message }, 'redis unavailable at start-up'));
  await ensureTopics(kafka, cfg, services.topics);
  await services.kafkaAdmin.connect();
  await services.producer.connect();
  return services;
}

export async function closeServices(s: Services): Promise<void> {
  await s.producer.disconnect().catch(() => undefined);
  await s.kafkaAdmin.disconnect().catch(() => undefined);
  s.redis.disconnect();
  await s.ch.close().catch(() => undefined);
  await s.db.end().catch(() => undefined);
}
