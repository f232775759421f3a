import type { Kafka } from 'kafkajs';
import { runConsumer, type RunningConsumer } from '../../lib/consumer.js';
import type { ConsumerKind } from '../../lib/kafka.js';
import { Sink } from './sink.js';
import type { SinkOptions, SinkRow, SinkTarget } from './target.js';

export interface RunningSink<R extends SinkRow = SinkRow> {
  sink: Sink<R>;
  consumer: RunningConsumer;
  /** Stops fetching, writes and commits what is held (within `drainMs`), then leaves the group. */
  stop(): Promise<void>;
}

/**
 * Runs a sink as one member of `groupId`, over as many concurrent partitions as the topic has.
 * `fetch`: its consumer's kind (lib/kafka.ts), `hold` unless given.
 */
export async function runSink<R extends SinkRow>(
  kafka: Kafka,
  target: SinkTarget<R>,
  opts: SinkOptions & { groupId: string; partitions: number; drainMs: number; fetch?: ConsumerKind },
): Promise<RunningSink<R>> {
  const sink = new Sink<R>(opts, target);
  const consumer = await runConsumer(kafka, opts.log, {
    groupId: opts.groupId,
    topic: opts.topics.events,
    eachBatch: sink.eachBatch,
    partitionsConsumedConcurrently: opts.partitions,
    kind: opts.fetch ?? 'hold',
    onCreate: (c) => sink.attach(c),
  });
  return {
    sink,
    consumer,
    async stop() {
      await sink.drain(opts.drainMs);
      await consumer.stop();
    },
  };
}
