import { Kafka, logLevel, type Producer, type LogEntry } from 'kafkajs';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import { topicNames, type Topics } from './events.js';

const levels: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

export function createKafka(cfg: Config, log: Logger, clientId = cfg.KAFKA_CLIENT_ID): Kafka {
  const kafkaLog = log.child({ component: 'kafka' });
  return new Kafka({
    clientId,
    brokers: cfg.KAFKA_BROKERS,
    connectionTimeout: 3000,
    requestTimeout: 10000,
    retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 5000 },
    logLevel: logLevel.WARN,
    logCreator:
      () =>
      ({ level, log: entry }: LogEntry) => {
        const { message, ...rest } = entry;
        kafkaLog[levels[level] ?? 'info'](rest, message);
      },
  });
}

export function topicsFor(cfg: Config): Topics {
  return topicNames(cfg.KAFKA_TOPIC_PREFIX);
}

/** Creates the contract's topics when missing; safe to call from every process at start-up. */
export async function ensureTopics(kafka: Kafka, cfg: Config, topics: Topics = topicsFor(cfg)): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const wanted = [
      { topic: topics.events, numPartitions: cfg.KAFKA_PARTITIONS },
      { topic: topics.deadLetter, numPartitions: 1 },
    ].filter((t) => !existing.has(t.topic));
    if (wanted.length > 0) {
      await admin.createTopics({
        waitForLeaders: true,
        topics: wanted,
      });
    }
  } finally {
    await admin.disconnect();
  }
}

/** An idempotent producer: acks from all in-sync replicas, no duplicates on retry. */
export function createProducer(kafka: Kafka): Producer {
  return kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
}
