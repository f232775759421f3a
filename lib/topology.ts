import type { Admin, ITopicConfig, Kafka } from 'kafkajs';
import type { Config } from './config.js';

/**
 * Every Kafka topic of the system, with its partitions and configuration. Producers never create
 * topics (allowAutoTopicCreation is off) and neither does the broker: each process calls
 * `ensureTopology` once at start-up, so a topic exists before anything reads or writes it,
 * whichever process starts first. A new stream is one more entry in `topology`.
 */

export interface Topics {
  /** Accepted events, keyed by venue id so one venue's events stay in order. */
  events: string;
  /** Messages the sink could not process, with the error in headers. */
  deadLetter: string;
}

export function topicNames(prefix: string): Topics {
  return { events: `${prefix}.events.v1`, deadLetter: `${prefix}.events.dlq.v1` };
}

export const topicsFor = (cfg: Pick<Config, 'KAFKA_TOPIC_PREFIX'>): Topics => topicNames(cfg.KAFKA_TOPIC_PREFIX);

export interface DerivedTopics {
  occupancy: string;
  connectorHealth: string;
  /** Ingest outcomes per request (keyed by venue, partitioned like the events topic). */
  ingestReports: string;
}

export function derivedTopicNames(prefix: string): DerivedTopics {
  return {
    occupancy: `${prefix}.occupancy.v1`,
    connectorHealth: `${prefix}.connector-health.v1`,
    ingestReports: `${prefix}.ingest-reports.v1`,
  };
}

export const alarmTopicName = (prefix: string): string => `${prefix}.alarms.v1`;

/** The stream processors that keep state, by their `name` (pipeline/processors/): one changelog each. */
export const STATEFUL_PROCESSORS = ['occupancy', 'health'] as const;
export type StatefulProcessor = (typeof STATEFUL_PROCESSORS)[number];

/** A processor's compacted state topic: the state of input partition p lives in its partition p. */
export const changelogTopicName = (prefix: string, processor: string): string => `${prefix}.proc.${processor}.changelog.v1`;

export interface TopicSpec extends ITopicConfig {
  numPartitions: number;
}
export type Topology = TopicSpec[];
export type TopologyConfig = Pick<Config, 'KAFKA_TOPIC_PREFIX' | 'KAFKA_PARTITIONS'>;

/** The events topic and its dead letters, under the given names (the system's, or a test's own pair). */
export function eventsTopology(topics: Topics, partitions: number): Topology {
  return [
    { topic: topics.events, numPartitions: partitions },
    { topic: topics.deadLetter, numPartitions: 1 },
  ];
}

/** Keeps the newest entry per key: a processor's state, not its history. */
const COMPACTED = [{ name: 'cleanup.policy', value: 'compact' }];

/**
 * Every topic of the configured system. The venue-keyed streams all have the events topic's
 * partition count, so a venue's messages share one partition number across them (the processors'
 * co-partitioned assignment relies on it).
 */
export function topology(cfg: TopologyConfig): Topology {
  const prefix = cfg.KAFKA_TOPIC_PREFIX;
  const keyed = (topic: string): TopicSpec => ({ topic, numPartitions: cfg.KAFKA_PARTITIONS });
  const derived = derivedTopicNames(prefix);
  return [
    ...eventsTopology(topicNames(prefix), cfg.KAFKA_PARTITIONS),
    keyed(derived.occupancy),
    keyed(derived.connectorHealth),
    keyed(derived.ingestReports),
    keyed(alarmTopicName(prefix)),
    ...STATEFUL_PROCESSORS.map((p) => ({ ...keyed(changelogTopicName(prefix, p)), configEntries: COMPACTED })),
  ];
}

/**
 * Creates those of `topics` that are missing (replication factor and min.insync.replicas are the
 * brokers' defaults) and waits until every partition of the new ones has a leader. kafkajs's own
 * `waitForLeaders` gives up when the broker it asks has not applied the new topic yet, which on a
 * multi-broker cluster happens (each broker applies the controller's records a moment apart), so an
 * unknown topic is waited for here too. A topic another process created meanwhile is fine.
 */
export async function createMissingTopics(admin: Admin, topics: ITopicConfig[], timeoutMs = 30_000): Promise<void> {
  const existing = new Set(await admin.listTopics());
  const wanted = topics.filter((t) => !existing.has(t.topic));
  if (wanted.length === 0) return;
  await admin.createTopics({ topics: wanted, waitForLeaders: false });
  const names = wanted.map((t) => t.topic);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const led = await admin
      .fetchTopicMetadata({ topics: names })
      .then(
        ({ topics: found }) =>
          found.length === names.length && found.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0)),
      )
      .catch((err: { retriable?: boolean }) => {
        if (err.retriable) return false;
        throw err;
      });
    if (led) return;
    if (Date.now() > deadline) throw new Error(`topics ${names.join(', ')} have no leader for every partition after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Creates the missing topics of the configured system (or of the given topology); idempotent and
 * safe to run from several processes at once.
 */
export async function ensureTopology(kafka: Kafka, of: TopologyConfig | Topology): Promise<void> {
  const topics = Array.isArray(of) ? of : topology(of);
  const admin = kafka.admin();
  await admin.connect();
  try {
    await createMissingTopics(admin, topics);
  } finally {
    await admin.disconnect();
  }
}
