import { randomUUID } from 'node:crypto';
import { Kafka, Partitioners, logLevel, type Consumer, type Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConfig } from '../support/env.js';
import { createLogger } from '../../lib/logger.js';
import { runLiveTail, type RunningConsumer } from '../../lib/consumer.js';
import { createMissingTopics } from '../../lib/topology.js';

const cfg = testConfig();
const kafka = new Kafka({ brokers: cfg.KAFKA_BROKERS, clientId: 'live-tail-test', logLevel: logLevel.NOTHING });
const topic = `${cfg.KAFKA_TOPIC_PREFIX}.live-tail.${randomUUID().slice(0, 8)}`;
const PARTITIONS = 3;
let producer: Producer;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
async function until(what: string, done: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
}
/** One message per partition, named by the round. */
const sendRound = (round: string) =>
  producer.send({ topic, messages: Array.from({ length: PARTITIONS }, (_, partition) => ({ partition, value: `${round}/${partition}` })) });

beforeAll(async () => {
  const admin = kafka.admin();
  await admin.connect();
  await createMissingTopics(admin, [{ topic, numPartitions: PARTITIONS }]);
  await admin.disconnect();
  producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
});

afterAll(async () => {
  await producer?.disconnect();
});

describe('runLiveTail (the edge reads its streams with it)', () => {
  it('starts at the end, and skips nothing when its group rebalances and the member rejoins', async () => {
    await sendRound('before');
    const groupId = `${topic}.tail`;
    const seen: string[] = [];
    const assignments: number[][] = [];
    const tail: RunningConsumer = await runLiveTail(kafka, createLogger('live-tail-test', 'silent'), {
      groupId,
      topic,
      onCreate: (c) => c.on(c.events.GROUP_JOIN, (e) => assignments.push(e.payload.memberAssignment[topic] ?? [])),
      eachBatch: async ({ batch, resolveOffset }) => {
        for (const m of batch.messages) {
          seen.push(m.value!.toString());
          resolveOffset(m.offset);
        }
      },
    });
    let other: Consumer | undefined;
    try {
      await until('the tail joined with every partition', () => assignments.at(-1)?.length === PARTITIONS);
      await sendRound('one');
      await until('round one read', () => seen.length >= PARTITIONS);

      // A second member takes some partitions: the tail rejoins with fewer, and again with all of
      // them once it leaves. What was sent meanwhile to the partitions it did not hold must follow.
      other = kafka.consumer({ groupId, sessionTimeout: 10_000, heartbeatInterval: 1_000 });
      await other.connect();
      await other.subscribe({ topics: [topic] });
      await other.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        eachBatch: async () => {
          await sleep(10);
        },
      });
      await until('the tail gave partitions up', () => assignments.length >= 2 && assignments.at(-1)!.length < PARTITIONS);
      await sendRound('two');
      await sleep(1000);
      await other.disconnect();
      other = undefined;
      await until('the tail holds every partition again', () => assignments.at(-1)!.length === PARTITIONS);
      await sendRound('three');
      await until('rounds two and three read', () => seen.length >= 3 * PARTITIONS);
      await sleep(1000);
    } finally {
      await other?.disconnect();
      await tail.stop();
    }
    expect(seen.filter((v) => v.startsWith('before'))).toEqual([]);
    for (let partition = 0; partition < PARTITIONS; partition++) {
      expect(
        seen.filter((v) => v.endsWith(`/${partition}`)),
        `partition ${partition}`,
      ).toEqual(['one', 'two', 'three'].map((r) => `${r}/${partition}`));
    }
  });
});
