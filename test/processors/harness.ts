import { randomUUID } from 'node:crypto';
import type { Admin, Kafka, KafkaMessage, Producer } from 'kafkajs';
import { testConfig } from '../support/env.js';
import { createLogger, type Logger } from '../../lib/logger.js';
import { createKafka, createProducer, topicEndOffsets } from '../../lib/kafka.js';
import { derivedTopicNames, ensureTopology, type DerivedTopics, type Topics } from '../../lib/topology.js';
import { encodeEventMessages } from '../../lib/events/wire.js';
import { type CanonicalEvent } from '../../lib/events/canonical.js';
import type { Config } from '../../lib/config.js';
import { createCh, type Ch } from '../../clickhouse/client.js';
import { createDb, one, sql, type Db } from '../../postgres/client.js';
import { runProcessors, type RunningProcessors } from '../../pipeline/processors/run.js';
import { waitFor } from '../pipeline/harness.js';

export { deviceId, event, waitFor } from '../pipeline/harness.js';

/** A real stack for processor tests: its own topic prefix, so groups, changelogs and outputs are its own. */
export interface ProcHarness {
  cfg: Config;
  log: Logger;
  kafka: Kafka;
  admin: Admin;
  producer: Producer;
  ch: Ch;
  db: Db;
  prefix: string;
  topics: Topics;
  derived: DerivedTopics;
  close(): Promise<void>;
}

export async function openProcHarness(
  prefix = `${testConfig().KAFKA_TOPIC_PREFIX}.proc-${randomUUID().slice(0, 8)}`,
): Promise<ProcHarness> {
  const cfg = testConfig();
  const log = createLogger('proc-test', cfg.LOG_LEVEL);
  const kafka = createKafka(cfg, log, `proc-test-${randomUUID().slice(0, 8)}`);
  const topics: Topics = { events: `${prefix}.events.v1`, deadLetter: `${prefix}.events.dlq.v1` };
  const derived = derivedTopicNames(prefix);
  await ensureTopology(kafka, { KAFKA_TOPIC_PREFIX: prefix, KAFKA_PARTITIONS: cfg.KAFKA_PARTITIONS });
  const admin = kafka.admin();
  await admin.connect();
  const producer = createProducer(kafka);
  await producer.connect();
  const ch = createCh(cfg);
  const db = createDb(cfg, 4);
  return {
    cfg,
    log,
    kafka,
    admin,
    producer,
    ch,
    db,
    prefix,
    topics,
    derived,
    async close() {
      await producer.disconnect();
      await admin.disconnect();
      await ch.close();
      await db.end();
    },
  };
}

/** An operator on `plan` with one venue (time zone, reset hour) and zones, straight in Postgres. */
export async function newVenue(
  db: Db,
  opts: { timezone?: string; resetHour?: number; zones?: Array<{ slug: string; type: string; capacity?: number }>; plan?: string } = {},
): Promise<{ operatorId: string; venueId: string; zones: Record<string, string> }> {
  const op = await one<{ id: string }>(
    db,
    sql`INSERT INTO operators (name, email, plan) VALUES ('proc test', 'proc@example.com', ${opts.plan ?? 'pro'}) RETURNING id`,
  );
  const v = await one<{ id: string }>(
    db,
    sql`INSERT INTO venues (operator_id, name, timezone, occupancy_reset_hour) VALUES (${op!.id}, 'proc venue', ${opts.timezone ?? 'UTC'}, ${opts.resetHour ?? 4}) RETURNING id`,
  );
  const zones: Record<string, string> = {};
  for (const z of opts.zones ?? []) {
    const row = await one<{ id: string }>(
      db,
      sql`INSERT INTO zones (venue_id, slug, name, type, capacity) VALUES (${v!.id}, ${z.slug}, ${`Zone ${z.slug}`}, ${z.type}, ${z.capacity ?? null}) RETURNING id`,
    );
    zones[z.slug] = row!.id;
  }
  return { operatorId: op!.id, venueId: v!.id, zones };
}

/** Publishes in order, keyed by venue (as ingest does). */
export async function produce(h: ProcHarness, events: CanonicalEvent[]): Promise<void> {
  for (let i = 0; i < events.length; i += 500) {
    await h.producer.send({
      topic: h.topics.events,
      acks: -1,
      messages: events.slice(i, i + 500).map((e) => ({ key: e.venueId, ...encodeEventMessages([e])[0]! })),
    });
  }
}

export function startProcessors(
  h: ProcHarness,
  only: Array<'occupancy' | 'health'>,
  tickMs = 300,
  outputBatchMs?: number,
): Promise<RunningProcessors> {
  return runProcessors({
    kafka: h.kafka,
    db: h.db,
    ch: h.ch,
    producer: h.producer,
    log: h.log,
    prefix: h.prefix,
    partitions: h.cfg.KAFKA_PARTITIONS,
    events: h.topics.events,
    deadLetter: h.topics.deadLetter,
    derived: h.derived,
    batchRows: 5000,
    batchMs: 100,
    outputBatchMs,
    drainMs: 5000,
    tickMs,
    only,
  });
}

/** Resolves once `groupId` committed `topic` to its end. */
export async function committedToEnd(admin: Admin, groupId: string, topic: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    `${groupId} at the end of ${topic}`,
    async () => {
      // A topic created a moment ago may answer "not the leader" once: topicEndOffsets retries that.
      const ends = await topicEndOffsets(admin, topic);
      const [group] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return [...ends].every(([partition, high]) => {
        const c = Number(group!.partitions.find((p) => p.partition === partition)?.offset ?? -1);
        return Number(high) === 0 || c >= Number(high);
      });
    },
    timeoutMs,
  );
}

/** Every committed message of a topic, read from the beginning (read committed) until `settleMs` pass without new ones. */
export async function readAll(h: ProcHarness, topic: string, settleMs = 1500): Promise<KafkaMessage[]> {
  const out: KafkaMessage[] = [];
  const groupId = `proc-read-${randomUUID()}`;
  const reader = h.kafka.consumer({ groupId, maxWaitTimeInMs: 100, readUncommitted: false });
  await reader.connect();
  await reader.subscribe({ topic, fromBeginning: true });
  let last = Date.now();
  let joined = false;
  reader.on(reader.events.GROUP_JOIN, () => (joined = true));
  await reader.run({
    eachMessage: async ({ message }) => {
      out.push(message);
      last = Date.now();
    },
  });
  await waitFor('reader joined', async () => joined);
  last = Date.now();
  await waitFor('the topic read', async () => Date.now() - last > settleMs);
  await reader.disconnect();
  await h.admin.deleteGroups([groupId]).catch(() => undefined);
  return out;
}
