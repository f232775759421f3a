import { randomBytes, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Message } from 'kafkajs';
import { testConfig } from '../support/env.js';
import { createLogger } from '../../lib/logger.js';
import { createKafka } from '../../lib/kafka.js';
import { createMissingTopics } from '../../lib/topology.js';

/**
 * kafkajs's protocol encoder with large writes kept by reference (lib/kafkajs-encoder.ts): the
 * bytes it gives must be exactly those of kafkajs's own copying encoder, and a broker must take
 * what it produces, plain and in transactions.
 */
const require = createRequire(import.meta.url);
interface Enc {
  readonly buffer: Buffer;
  size(): number;
  writeInt8(v: number): Enc;
  writeInt16(v: number): Enc;
  writeInt32(v: number): Enc;
  writeString(v: string): Enc;
  writeBytes(v: Buffer): Enc;
  writeBuffer(v: Buffer): Enc;
  writeVarIntBytes(v: Buffer): Enc;
  writeEncoder(v: Enc): Enc;
  writeEncoderArray(v: Enc[]): Enc;
}
const Encoder = require('kafkajs/src/protocol/encoder.js') as new () => Enc;
const produceRequest = require('kafkajs/src/protocol/requests/produce/v3/request.js') as (o: object) => { encode(): Promise<Enc> };
const request = require('kafkajs/src/protocol/request.js') as (o: object) => Promise<Enc>;

const cfg = testConfig();
const kafka = createKafka(cfg, createLogger('kafkajs-encoder-test', 'silent'), 'kafkajs-encoder-test');
const topic = `${cfg.KAFKA_TOPIC_PREFIX}.kafkajs-encoder.${randomUUID().slice(0, 8)}`;

/** The bytes kafkajs's own encoder writes: each write copied into one zero-filled buffer. */
function copying(steps: Array<[keyof Enc, unknown]>): Buffer {
  let bytes = Buffer.alloc(0);
  const append = (b: Buffer) => (bytes = Buffer.concat([bytes, b]));
  for (const [method, value] of steps) {
    const one = new Encoder();
    // A fresh encoder per step holds only small writes (below the by-reference size) or a single large one.
    (one[method] as (v: unknown) => Enc).call(one, value);
    append(one.buffer);
  }
  return bytes;
}

const sizes = [0, 1, 2047, 2048, 2049, 40_000, 300_000];

beforeAll(async () => {
  const admin = kafka.admin();
  await admin.connect();
  await createMissingTopics(admin, [{ topic, numPartitions: 1 }]);
  await admin.disconnect();
});

describe("kafkajs's protocol encoder (lib/kafkajs-encoder.ts)", () => {
  it('writes the same bytes as one copying buffer, for small and large writes, nested encoders and a second read', () => {
    for (const a of sizes)
      for (const b of [0, 5, 4096]) {
        const x = randomBytes(a);
        const y = randomBytes(b);
        const inner = new Encoder().writeInt32(7).writeBytes(x).writeString('mid').writeBuffer(y);
        const innerBytes = Buffer.concat([
          copying([
            ['writeInt32', 7],
            ['writeBytes', x],
            ['writeString', 'mid'],
          ]),
          y,
        ]);
        expect(inner.size()).toBe(innerBytes.length);
        const outer = new Encoder()
          .writeInt16(3)
          .writeEncoder(inner)
          .writeVarIntBytes(y)
          .writeEncoderArray([inner, new Encoder().writeInt8(1)]);
        const expected = Buffer.concat([
          copying([['writeInt16', 3]]),
          innerBytes,
          copying([['writeVarIntBytes', y]]),
          innerBytes,
          Buffer.from([1]),
        ]);
        expect(outer.size()).toBe(expected.length);
        expect(outer.buffer.equals(expected)).toBe(true);
        // Read again, and written on after a read: nothing lost, nothing doubled.
        expect(outer.buffer.equals(expected)).toBe(true);
        outer.writeInt32(9).writeBuffer(x);
        expect(outer.buffer.equals(Buffer.concat([expected, copying([['writeInt32', 9]]), x]))).toBe(true);
      }
  });

  it('keeps a large write by reference instead of copying it', () => {
    const value = randomBytes(40_000);
    expect(new Encoder().writeBuffer(value).buffer.buffer).toBe(value.buffer);
    expect(new Encoder().writeBuffer(randomBytes(100)).buffer.buffer).not.toBe(value.buffer);
  });

  it("never hands a caller's buffer back changed", () => {
    const value = randomBytes(10_000);
    const before = Buffer.from(value);
    const e = new Encoder().writeBuffer(value);
    void e.buffer;
    e.writeInt32(1).writeInt32(2);
    void e.buffer;
    expect(value.equals(before)).toBe(true);
  });

  it('encodes a whole produce request: its size prefix counts the rest, and every value is in it whole and in order', async () => {
    const messages = [1, 3000, 40_000].map((n, i) => ({ key: `k${i}`, value: randomBytes(n), headers: { 'event-types': 'device_seen' } }));
    const payload = await request({
      correlationId: 5,
      clientId: 'c',
      request: produceRequest({
        acks: -1,
        timeout: 1000,
        compression: 0,
        topicData: [{ topic: 't', partitions: [{ partition: 0, firstSequence: 0, messages }] }],
      }),
    });
    const bytes = payload.buffer;
    // The size prefix counts the rest, and every value appears whole, in order.
    expect(bytes.readInt32BE(0)).toBe(bytes.length - 4);
    let at = 0;
    for (const m of messages) {
      const found = bytes.indexOf(m.value, at);
      expect(found).toBeGreaterThan(at);
      at = found + m.value.length;
    }
  });

  it('produces what a broker takes and reads back as sent, plain and in a transaction', async () => {
    const producer = kafka.producer();
    const txProducer = kafka.producer({ transactionalId: `encoder-${randomUUID()}`, idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    await txProducer.connect();
    const sent: Message[] = sizes.map((n, i) => ({ key: `key-${i}`, value: randomBytes(n), headers: { n: String(n) } }));
    try {
      for (const m of sent) await producer.send({ topic, acks: -1, messages: [m] });
      await producer.send({ topic, acks: -1, messages: sent });
      const tx = await txProducer.transaction();
      await tx.send({ topic, messages: sent });
      await tx.commit();
    } finally {
      await producer.disconnect();
      await txProducer.disconnect();
    }
    const consumer = kafka.consumer({ groupId: `encoder-${randomUUID()}`, maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const received: Array<{ key: string; value: string; n: string }> = [];
    await new Promise<void>((resolve) => {
      void consumer.run({
        eachMessage: async ({ message }) => {
          received.push({ key: String(message.key), value: message.value!.toString('base64'), n: String(message.headers?.n) });
          if (received.length === 3 * sent.length) resolve();
        },
      });
    });
    await consumer.disconnect();
    const one = sent.map((m) => ({ key: String(m.key), value: (m.value as Buffer).toString('base64'), n: String(m.headers!.n) }));
    expect(received).toEqual([...one, ...one, ...one]);
  }, 60_000);
});
