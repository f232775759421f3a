import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Kafka, logLevel } from 'kafkajs';
import { testConfig } from '../support/env.js';
import { createDb, one, sql } from '../../postgres/client.js';
import { createCh, chRows, chsql, insertRows, raw } from '../../clickhouse/client.js';
import { createRedis } from '../../lib/redis.js';
import { createMissingTopics } from '../../lib/topology.js';

const cfg = testConfig();

describe('the real engines', () => {
  it('round-trips a message through the Kafka broker with kafkajs', async () => {
    const kafka = new Kafka({ brokers: cfg.KAFKA_BROKERS, clientId: 'roundtrip', logLevel: logLevel.NOTHING });
    const topic = `${cfg.KAFKA_TOPIC_PREFIX}.roundtrip.${randomUUID()}`;
    const admin = kafka.admin();
    await admin.connect();
    await createMissingTopics(admin, [{ topic, numPartitions: 1 }]);
    await admin.disconnect();

    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const body = { hello: 'kafka', id: randomUUID() };
    const [meta] = await producer.send({ topic, acks: -1, messages: [{ key: 'venue-1', value: JSON.stringify(body) }] });
    expect(meta?.errorCode).toBe(0);
    await producer.disconnect();

    const consumer = kafka.consumer({ groupId: `roundtrip-${randomUUID()}`, maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const received = await new Promise<{ key: string; value: unknown }>((resolve) => {
      void consumer.run({
        eachMessage: async ({ message }) => resolve({ key: message.key!.toString(), value: JSON.parse(message.value!.toString()) }),
      });
    });
    await consumer.disconnect();
    expect(received).toEqual({ key: 'venue-1', value: body });
  });

  it('round-trips rows through ClickHouse, escaping values through the one literal helper', async () => {
    const ch = createCh(cfg);
    const table = raw(`roundtrip_${Date.now()}`);
    await ch.command({ query: chsql`CREATE TABLE ${table} (id UUID, name String, v Float64) ENGINE = MergeTree ORDER BY id`.text });
    const id = randomUUID();
    const tricky = "O'Brien \\ café";
    await ch.insert({ table: table.text, values: [{ id, name: tricky, v: 1.5 }], format: 'JSONEachRow' });
    const rowsBack = await chRows<{ id: string; name: string; v: number }>(
      ch,
      chsql`SELECT id, name, v FROM ${table} WHERE name = ${tricky}`,
    );
    expect(rowsBack).toEqual([{ id, name: tricky, v: 1.5 }]);
    await ch.command({ query: `DROP TABLE ${table.text}` });
    await ch.close();
  });

  it('inserts a large batch in one INSERT streamed in chunks, every row exactly as given, and reports a bad row', async () => {
    const ch = createCh(cfg);
    const table = raw(`insert_rows_${Date.now()}`);
    await ch.command({ query: chsql`CREATE TABLE ${table} (n UInt32, name String) ENGINE = MergeTree ORDER BY n`.text });
    // About 1.2 MB of rows, many chunks; multi-byte text, quotes and newlines inside values.
    const rows = Array.from({ length: 6000 }, (_, n) => ({ n, name: `${'é€😀'.repeat(n % 40)} "row" ${n}\n\\ end` }));
    await insertRows(ch, table.text, rows);
    const back = await chRows<{ n: number; name: string }>(ch, chsql`SELECT n, name FROM ${table} ORDER BY n`);
    expect(back).toEqual(rows);
    const parts = await chRows<{ c: string }>(
      ch,
      chsql`SELECT count() AS c FROM system.parts WHERE database = currentDatabase() AND table = ${table.text} AND active`,
    );
    expect(Number(parts[0]!.c)).toBe(1);
    await expect(insertRows(ch, table.text, [{ n: 'not a number', name: 'x' }])).rejects.toThrow();
    // The connection went back to the pool in a usable state.
    expect(await chRows<{ c: string }>(ch, chsql`SELECT count() AS c FROM ${table}`)).toEqual([{ c: '6000' }]);
    await ch.command({ query: `DROP TABLE ${table.text}` });
    await ch.close();
  });

  it('round-trips rows through Postgres with parameterised statements', async () => {
    const db = createDb(cfg, 1);
    const name = "Robert'); DROP TABLE operators;--";
    const created = await one<{ id: string }>(
      db,
      sql`INSERT INTO operators (name, email) VALUES (${name}, ${'a@example.com'}) RETURNING id`,
    );
    const back = await one<{ name: string; plan: string }>(db, sql`SELECT name, plan FROM operators WHERE id = ${created!.id}`);
    expect(back).toEqual({ name, plan: 'free' });
    await db.end();
  });

  it('talks to Redis', async () => {
    const redis = createRedis(cfg);
    await redis.connect();
    const key = `test:${randomUUID()}`;
    await redis.set(key, '42', 'EX', 10);
    expect(await redis.get(key)).toBe('42');
    redis.disconnect();
  });
});
