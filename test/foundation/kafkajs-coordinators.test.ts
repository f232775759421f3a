import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { testConfig } from '../support/env.js';
import { createLogger } from '../../lib/logger.js';
import { createKafka } from '../../lib/kafka.js';
import { createMissingTopics } from '../../lib/topology.js';

/**
 * kafkajs's coordinators kept per client (lib/kafkajs-coordinators.ts): a transactional producer
 * looks its transaction and group coordinators up once, not before each of its requests, and every
 * transaction still commits its records and its consumer offsets.
 */
const cfg = testConfig();
const kafka = createKafka(cfg, createLogger('kafkajs-coordinators-test', 'silent'), 'kafkajs-coordinators-test');
const topic = `${cfg.KAFKA_TOPIC_PREFIX}.kafkajs-coordinators.${randomUUID().slice(0, 8)}`;
const group = `${cfg.KAFKA_TOPIC_PREFIX}.kafkajs-coordinators.${randomUUID().slice(0, 8)}`;
const admin = kafka.admin();

beforeAll(async () => {
  await admin.connect();
  await createMissingTopics(admin, [{ topic, numPartitions: 1 }]);
  // On a broker just started, Kafka's own transaction and offset topics are still being created:
  // its look-ups answer COORDINATOR_NOT_AVAILABLE, which kafkajs retries, until they exist. One
  // transaction first, so the test counts the look-ups of a running broker.
  const warm = kafka.producer({ transactionalId: `coordinators-warm-${randomUUID()}`, idempotent: true, maxInFlightRequests: 1 });
  await warm.connect();
  try {
    await transact(warm, 0);
  } finally {
    await warm.disconnect();
  }
});

afterAll(async () => {
  await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  await admin.disconnect();
});

/** Counts the producer's requests by API name. */
function requestsOf(producer: Producer): Map<string, number> {
  const counts = new Map<string, number>();
  producer.on(producer.events.REQUEST, ({ payload }: { payload: { apiName: string } }) =>
    counts.set(payload.apiName, (counts.get(payload.apiName) ?? 0) + 1),
  );
  return counts;
}

async function transact(producer: Producer, n: number): Promise<void> {
  const txn = await producer.transaction();
  await txn.send({ topic, acks: -1, messages: [{ key: 'k', value: `record ${n}` }] });
  await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: String(n + 1) }] }] });
  await txn.commit();
}

describe("kafkajs's coordinators kept per client", () => {
  it('looks the coordinators up once for many transactions, each committing its records and offsets', async () => {
    const producer = kafka.producer({ transactionalId: `coordinators-${randomUUID()}`, idempotent: true, maxInFlightRequests: 1 });
    const counts = requestsOf(producer);
    await producer.connect();
    try {
      for (let n = 1; n <= 5; n++) await transact(producer, n);
    } finally {
      await producer.disconnect();
    }
    expect(counts.get('EndTxn')).toBe(5);
    expect(counts.get('TxnOffsetCommit')).toBe(5);
    // The transaction coordinator and the group's: two, where kafkajs alone asks four times a
    // transaction (23 here; kafkajs names FindCoordinator GroupCoordinator). The CONCURRENT_TRANSACTIONS
    // a loaded broker answers while it still writes the previous transaction's markers keeps them.
    expect(counts.get('GroupCoordinator')).toBe(2);
    const [offsets] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    expect(offsets!.partitions[0]!.offset).toBe('6');
    const [end] = await admin.fetchTopicOffsets(topic);
    // Six records and six commit markers, the warm-up's among them.
    expect(end!.high).toBe('12');
  });
});
