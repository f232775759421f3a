import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { consumerOptions, subscribeWhenKnown, topicEndOffsets, type ConsumerKind } from './kafka.js';
import type { Logger } from './logger.js';

export interface ConsumerSpec {
  groupId: string;
  topic: string;
  fromBeginning?: boolean;
  /** Processes one fetched batch; offsets are committed only for what it resolves. */
  eachBatch: (payload: EachBatchPayload) => Promise<void>;
  /** Batches (partitions) processed at once; default 1. */
  partitionsConsumedConcurrently?: number;
  /** Called with the consumer before it runs, e.g. to listen to group events. */
  onCreate?: (consumer: Consumer) => void;
  /** Its settings (lib/kafka.ts); default `bulk`. */
  kind?: ConsumerKind;
}

export interface RunningConsumer {
  consumer: Consumer;
  /** Stops fetching, lets the batch in hand finish and commit, then leaves the group. */
  stop(): Promise<void>;
}

/** Starts one consumer-group member with manual offset control. */
export async function runConsumer(kafka: Kafka, log: Logger, spec: ConsumerSpec): Promise<RunningConsumer> {
  const consumer = kafka.consumer(consumerOptions(spec.kind ?? 'bulk', { groupId: spec.groupId }));
  const clog = log.child({ group: spec.groupId, topic: spec.topic });
  consumer.on(consumer.events.GROUP_JOIN, (e) => clog.info({ assignment: e.payload.memberAssignment }, 'joined group'));
  consumer.on(consumer.events.CRASH, (e) => clog.error({ err: e.payload.error, restart: e.payload.restart }, 'consumer crashed'));
  spec.onCreate?.(consumer);
  await consumer.connect();
  await subscribeWhenKnown(consumer, { topics: [spec.topic], fromBeginning: spec.fromBeginning ?? true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: spec.partitionsConsumedConcurrently ?? 1,
    eachBatch: spec.eachBatch,
  });
  return {
    consumer,
    async stop() {
      await consumer.stop();
      await consumer.disconnect();
      clog.info('consumer stopped');
    },
  };
}

/**
 * A consumer that reads a topic live, from its end when started, and never skips a message while
 * it runs. It commits nothing (a live stream has no history to resume), so kafkajs, which forgets
 * the positions it resolved whenever the member rejoins (a heartbeat that finds the group
 * rebalancing, a lapsed session, a restart after a crash), would start again at the topic's end
 * and skip what arrived in between. Its positions live here instead: the end offsets when it starts,
 * then one past every message resolved, sought again on every join. A partition added later has no
 * position and is read from its beginning, which is after the start.
 */
export async function runLiveTail(kafka: Kafka, log: Logger, spec: Omit<ConsumerSpec, 'fromBeginning'>): Promise<RunningConsumer> {
  const admin = kafka.admin();
  await admin.connect();
  let positions: Map<number, string>;
  try {
    positions = await topicEndOffsets(admin, spec.topic);
  } finally {
    await admin.disconnect();
  }
  return runConsumer(kafka, log, {
    ...spec,
    kind: 'live',
    fromBeginning: true,
    onCreate: (consumer) => {
      consumer.on(consumer.events.GROUP_JOIN, (e) => {
        for (const partition of e.payload.memberAssignment[spec.topic] ?? []) {
          const offset = positions.get(partition);
          if (offset !== undefined) consumer.seek({ topic: spec.topic, partition, offset });
        }
      });
      spec.onCreate?.(consumer);
    },
    eachBatch: (payload) =>
      spec.eachBatch({
        ...payload,
        resolveOffset: (offset) => {
          positions.set(payload.batch.partition, String(Number(offset) + 1));
          payload.resolveOffset(offset);
        },
      }),
  });
}
