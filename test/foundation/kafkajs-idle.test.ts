import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConfig } from '../support/env.js';
import { createLogger } from '../../lib/logger.js';
import { createKafka, topicEndOffsets } from '../../lib/kafka.js';
import { createMissingTopics } from '../../lib/topology.js';

const cfg = testConfig();
const kafka = createKafka(cfg, createLogger('kafkajs-idle-test', 'silent'), 'kafkajs-idle-test');
const topic = `${cfg.KAFKA_TOPIC_PREFIX}.kafkajs-idle.${randomUUID().slice(0, 8)}`;
const queue = (
  createRequire(import.meta.url)('kafkajs/src/network/requestQueue/index.js') as { prototype: { checkPendingRequests(): void } }
).prototype;
const original = queue.checkPendingRequests;
let checks = 0;
const producers: Producer[] = [];

beforeAll(async () => {
  const admin = kafka.admin();
  await admin.connect();
  await createMissingTopics(admin, [{ topic, numPartitions: 1 }]);
  await admin.disconnect();
  queue.checkPendingRequests = function (this: unknown) {
    checks++;
    return original.call(this);
  };
});

afterAll(async () => {
  queue.checkPendingRequests = original;
  await Promise.all(producers.map((p) => p.disconnect()));
});

async function connectedProducer(maxInFlightRequests?: number): Promise<Producer> {
  const producer = kafka.producer({ maxInFlightRequests });
  producers.push(producer);
  await producer.connect();
  return producer;
}

describe('kafkajs request queues (lib/kafkajs-request-queue.ts)', () => {
  it('leave the process asleep while a connection has nothing to send', async () => {
    const producer = await connectedProducer();
    await producer.send({ topic, messages: [{ value: 'wake' }] });
    checks = 0;
    await new Promise((r) => setTimeout(r, 1000));
    // kafkajs 2.2.4 as released checks every queue about once a millisecond, for ever: hundreds here.
    expect(checks).toBeLessThan(20);
  });

  it('still send every request the in-flight limit held back', async () => {
    const producer = await connectedProducer(1);
    const before = Number((await offsetsOf())[0]);
    await Promise.all(Array.from({ length: 40 }, (_, i) => producer.send({ topic, messages: [{ value: `held-${i}` }] })));
    expect(Number((await offsetsOf())[0]) - before).toBe(40);
  });
});

async function offsetsOf(): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return [...(await topicEndOffsets(admin, topic)).values()];
  } finally {
    await admin.disconnect();
  }
}
