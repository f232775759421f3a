import type { Kafka, Producer, Admin } from 'kafkajs';
import type { Redis } from 'ioredis';
import type { Config } from '../../lib/config.js';
import type { Logger } from '../../lib/logger.js';
import { createKafka, createProducer, createPublisher, type Publisher } from '../../lib/kafka.js';
import { ensureTopology, topicsFor, type Topics } from '../../lib/topology.js';
import { createRedis } from '../../lib/redis.js';
import { createDb, type Db } from '../../postgres/client.js';
import { createCh, type Ch } from '../../clickhouse/client.js';

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
  /** Ingest's acknowledged, deadline-bounded publishing to the events topic; connects on first use. */
  publisher: Publisher;
  topics: Topics;
  startedAt: number;
}

export async function createServices(cfg: Config, log: Logger, opts: { dbPoolSize?: number } = {}): Promise<Services> {
  const kafka = createKafka(cfg, log);
  const services: Services = {
    cfg,
    log,
    db: createDb(cfg, opts.dbPoolSize, log),
    ch: createCh(cfg, cfg.CLICKHOUSE_DATABASE, { log }),
    redis: createRedis(cfg),
    kafka,
    kafkaAdmin: kafka.admin(),
    producer: createProducer(kafka),
    publisher: createPublisher(kafka, log),
    topics: topicsFor(cfg),
    startedAt: Date.now(),
  };
  // Redis is optional at run time (rate limits fall back to per-instance counting), so a failed
  // first connect is logged, not fatal; ioredis keeps retrying in the background.
  services.redis.on('error', (err) => log.debug({ err }, 'redis error'));
  await services.redis.connect().catch((err: unknown) => log.warn({ err }, 'redis unavailable at start-up'));
  // Kafka being down at start-up is not fatal either: reads keep working, /health shows kafka
  // disconnected, ingest answers 503, and the connection is retried in the background.
  const connectKafka = async () => {
    // Every topic of the system, whichever process starts first (lib/topology.ts).
    await ensureTopology(kafka, cfg);
    await services.kafkaAdmin.connect();
    await services.producer.connect();
  };
  await connectKafka().catch((err: unknown) => {
    log.warn({ err }, 'kafka unavailable at start-up; retrying in the background');
    let delay = 1000;
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    const attempt = () => {
      timer = setTimeout(() => {
        connectKafka().then(
          () => log.info('kafka connected'),
          () => {
            delay = Math.min(delay * 2, 30_000);
            if (!stopped) attempt();
          },
        );
      }, delay);
      timer.unref();
    };
    stopKafkaRetries.set(services, () => {
      stopped = true;
      clearTimeout(timer);
    });
    attempt();
  });
  return services;
}

/** Cancels the background Kafka connection attempts of a Services started without Kafka. */
const stopKafkaRetries = new WeakMap<Services, () => void>();

/**
 * Closes the engines in order. A step that fails is logged and the next one still runs, so one
 * engine that cannot close leaves none of the others open.
 */
export async function closeServices(s: Services): Promise<void> {
  stopKafkaRetries.get(s)?.();
  const steps: Array<[string, () => unknown]> = [
    ['the kafka publisher', () => s.publisher.disconnect()],
    ['the kafka producer', () => s.producer.disconnect()],
    ['the kafka admin client', () => s.kafkaAdmin.disconnect()],
    ['redis', () => s.redis.disconnect()],
    ['clickhouse', () => s.ch.close()],
    ['postgres', () => s.db.end()],
  ];
  for (const [what, close] of steps) {
    s.log.debug(`closing ${what}`);
    try {
      await close();
    } catch (err) {
      s.log.warn({ err }, `could not close ${what}; closing the rest`);
    }
  }
}
