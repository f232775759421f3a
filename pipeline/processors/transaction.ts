import { Partitioners, type Kafka, type Producer } from 'kafkajs';
import { inSends } from '../../lib/kafka.js';
import type { Logger } from '../../lib/logger.js';

/** The Kafka transactions of a partition: its transactional id, and one commit of records and consumed offsets. */

export interface PartitionRecord {
  topic: string;
  key: string;
  value: Buffer | null;
}

export interface TransactionCounters {
  transactions: number;
  aborts: number;
}

/**
 * Takes a transactional id: initialising it bumps the id's epoch, so a previous owner (a killed
 * instance, or a member that lost the partition in a rebalance) can no longer commit, and the
 * broker completes or aborts whatever it left open before answering. (kafkajs initialises the id on
 * the first transaction, not on connect; an empty one is aborted without a round trip.)
 */
export async function takeTransactionalId(
  kafka: Kafka,
  transactionalId: string,
  transactionTimeoutMs: number,
  log: Logger,
): Promise<Producer> {
  const producer = kafka.producer({
    transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: transactionTimeoutMs,
    allowAutoTopicCreation: false,
    // Every message names its partition (the input's): the partitioner is never asked.
    createPartitioner: Partitioners.DefaultPartitioner,
  });
  try {
    await producer.connect();
    await (await producer.transaction()).abort();
  } catch (err) {
    await producer
      .disconnect()
      .catch((e: unknown) => log.debug({ err: e }, 'producer that failed to initialise did not disconnect cleanly'));
    throw err;
  }
  return producer;
}

/** Disconnects a transactional producer; a failure is only logged (its id is taken again before any use). */
export async function closeProducer(producer: Producer, log: Logger, partition: number): Promise<void> {
  await producer.disconnect().catch((e: unknown) => log.debug({ err: e, partition }, 'transactional producer did not disconnect cleanly'));
}

/**
 * Writes `records` to `partition` of their topics and commits `offsets` (next offset per input
 * topic) for `group`, in one transaction: all of it commits, or none.
 */
export async function commitTransaction(
  producer: Producer,
  partition: number,
  records: PartitionRecord[],
  offsets: ReadonlyMap<string, bigint>,
  group: string,
  counters: TransactionCounters,
  log: Logger,
): Promise<void> {
  const txn = await producer.transaction();
  try {
    for (const send of inSends(groupByTopic(records, partition))) await txn.sendBatch({ acks: -1, topicMessages: send });
    if (offsets.size > 0) {
      const topics = [...offsets].map(([topic, next]) => ({ topic, partitions: [{ partition, offset: next.toString() }] }));
      await whileConcurrent(() => txn.sendOffsets({ consumerGroupId: group, topics }));
    }
    await txn.commit();
    counters.transactions++;
  } catch (err) {
    counters.aborts++;
    await txn.abort().catch((e: unknown) => {
      if (fenced(e)) log.debug({ partition }, 'abort refused: the transaction was ended by the fencing');
      else log.warn({ err: e }, 'abort failed; the next owner of the id has the broker abort it');
    });
    throw err;
  }
}

/** The transactional id was taken by another producer (a member that now owns the partition). */
export function fenced(err: unknown): boolean {
  const type =
    (err as { type?: unknown; originalError?: { type?: unknown } } | undefined)?.type ??
    (err as { originalError?: { type?: unknown } } | undefined)?.originalError?.type;
  return type === 'INVALID_PRODUCER_EPOCH' || type === 'PRODUCER_FENCED';
}

/**
 * The transaction coordinator answers CONCURRENT_TRANSACTIONS while it is still writing the markers
 * of the previous transaction; the Java client retries, and kafkajs does not for AddOffsetsToTxn.
 * The refused request changed nothing, so it is sent again after a short wait.
 */
async function whileConcurrent<T>(send: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await send();
    } catch (err) {
      if ((err as { type?: unknown }).type !== 'CONCURRENT_TRANSACTIONS' || attempt >= 40) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.min(10 * 2 ** attempt, 250)));
    }
  }
}

function groupByTopic(
  records: PartitionRecord[],
  partition: number,
): Array<{ topic: string; messages: Array<{ key: string; value: Buffer | null; partition: number }> }> {
  const byTopic = new Map<string, Array<{ key: string; value: Buffer | null; partition: number }>>();
  for (const { topic, key, value } of records) {
    let list = byTopic.get(topic);
    if (!list) byTopic.set(topic, (list = []));
    list.push({ key, value, partition });
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}
