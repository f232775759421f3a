import { randomBytes, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { beforeAll, describe, expect, it } from 'vitest';
import { testConfig } from '../support/env.js';
import { createLogger } from '../../lib/logger.js';
import { createKafka } from '../../lib/kafka.js';
import { kafkaBatchChecksum } from '../../lib/kafkajs-crc32c.js';
import { createMissingTopics } from '../../lib/topology.js';

const require = createRequire(import.meta.url);
/** kafkajs's own CRC-32C, in JavaScript: what the native one must equal. */
const kafkajsCrc32c = require('kafkajs/src/protocol/recordBatch/crc32C/crc32C.js') as (bytes: Buffer) => number;

const cfg = testConfig();
const kafka = createKafka(cfg, createLogger('kafkajs-crc32c-test', 'silent'), 'kafkajs-crc32c-test');
const topic = `${cfg.KAFKA_TOPIC_PREFIX}.kafkajs-crc32c.${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  const admin = kafka.admin();
  await admin.connect();
  await createMissingTopics(admin, [{ topic, numPartitions: 1 }]);
  await admin.disconnect();
});

describe('record batch checksums (lib/kafkajs-crc32c.ts)', () => {
  it('come from the native CRC-32C in kafkajs, equal to its own on any bytes', () => {
    expect(require('kafkajs/src/protocol/recordBatch/crc32C/index.js')).toBe(kafkaBatchChecksum);
    // The standard check value of CRC-32C (Castagnoli).
    expect(kafkaBatchChecksum(Buffer.from('123456789'))).toBe(0xe3069283);
    for (const size of [0, 1, 7, 8, 9, 1000, 32 * 1024 + 3, 300_000]) {
      const bytes = randomBytes(size);
      expect(kafkaBatchChecksum(bytes)).toBe(kafkajsCrc32c(bytes));
    }
  });

  it('are accepted by the broker, which checks every batch it appends, and the messages read back as sent', async () => {
    const producer = kafka.producer();
    await producer.connect();
    const sent = [1, 100, 40_000, 200_000].map((size) => randomBytes(size));
    try {
      for (const value of sent) await producer.send({ topic, acks: -1, messages: [{ value }] });
      await producer.send({ topic, acks: -1, messages: sent.map((value) => ({ value })) });
    } finally {
      await producer.disconnect();
    }
    const consumer = kafka.consumer({ groupId: `crc32c-${randomUUID()}`, maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const received: Buffer[] = [];
    await new Promise<void>((resolve) => {
      void consumer.run({
        eachMessage: async ({ message }) => {
          received.push(message.value!);
          if (received.length === 2 * sent.length) resolve();
        },
      });
    });
    await consumer.disconnect();
    expect(received.map((b) => b.toString('base64'))).toEqual([...sent, ...sent].map((b) => b.toString('base64')));
  });
});
