import { randomUUID } from 'node:crypto';
import type { Admin, Kafka } from 'kafkajs';
import { consumerOptions, subscribeWhenKnown, topicOffsets } from '../../lib/kafka.js';
import type { Logger } from '../../lib/logger.js';
import { ChangelogLayout } from './changelog.js';
import { PartitionTask } from './partition-task.js';
import type { Processor } from './processor.js';
import { closeProducer, takeTransactionalId, type TransactionCounters } from './transaction.js';

/** A partition's state as its changelog holds it, and where the group's commits leave its inputs. */
interface RestoredPartition<S> {
  state: S;
  layout: ChangelogLayout;
  /** Next offset per input topic as of the group's last commit. */
  committed: Map<string, bigint>;
}

export interface RestoreOptions<S> {
  kafka: Kafka;
  admin: Admin;
  processor: Processor<S>;
  changelog: string;
  /** The processor's consumer group, whose committed input offsets are read. */
  group: string;
  partitions: number[];
  /** Keeps the group membership alive while the changelog is read. */
  heartbeat: () => Promise<void>;
  transactionTimeoutMs: number;
  counters: TransactionCounters;
  log: Logger;
}

/**
 * The tasks of `partitions`: first each partition's transactional id is taken (nothing of a
 * previous owner's may commit after the changelog and offsets are read), then its state is
 * restored from the changelog and its position from the group's commits. On failure no producer
 * is left open.
 */
export async function restoreTasks<S>(opts: RestoreOptions<S>): Promise<{ tasks: Array<PartitionTask<S>>; entries: number }> {
  const { kafka, group, log } = opts;
  const taken = await Promise.allSettled(
    opts.partitions.map((p) => takeTransactionalId(kafka, `${group}.p${p}`, opts.transactionTimeoutMs, log)),
  );
  const producers = taken.flatMap((t, i) => (t.status === 'fulfilled' ? [[opts.partitions[i]!, t.value] as const] : []));
  try {
    const failed = taken.find((t) => t.status === 'rejected');
    if (failed) throw failed.reason;
    const { restored, entries } = await restorePartitions(opts);
    const tasks = producers.map(([p, producer]) => {
      const { state, layout, committed } = restored.get(p)!;
      return new PartitionTask({
        processor: opts.processor,
        partition: p,
        state,
        layout,
        producer,
        committed,
        group,
        changelog: opts.changelog,
        counters: opts.counters,
        log,
      });
    });
    return { tasks, entries };
  } catch (err) {
    await Promise.all(producers.map(([p, producer]) => closeProducer(producer, log, p)));
    throw err;
  }
}

/**
 * Rebuilds the state of `partitions`: a throwaway consumer group reads the changelog (committed
 * entries only) from the beginning up to the end offsets taken now, keeping the entries of those
 * partitions; then the group's committed input offsets are read.
 */
async function restorePartitions<S>(opts: RestoreOptions<S>): Promise<{ restored: Map<number, RestoredPartition<S>>; entries: number }> {
  const { kafka, admin, processor, changelog, log } = opts;
  const ends = new Map((await topicOffsets(admin, changelog)).map((o) => [o.partition, { low: BigInt(o.low), high: BigInt(o.high) }]));
  const restored = new Map<number, RestoredPartition<S>>(
    opts.partitions.map((p) => [
      p,
      { state: processor.createState(), layout: new ChangelogLayout(), committed: new Map<string, bigint>() },
    ]),
  );
  const pending = new Set(opts.partitions.filter((p) => (ends.get(p)?.high ?? 0n) > (ends.get(p)?.low ?? 0n)));
  let entries = 0;
  if (pending.size > 0) {
    const groupId = `${opts.group}.restore.${randomUUID()}`;
    const reader = kafka.consumer(consumerOptions('restore', { groupId }));
    reader.on(reader.events.END_BATCH_PROCESS, (e) => {
      const { partition, lastOffset } = e.payload;
      if (pending.has(partition) && BigInt(lastOffset) + 1n >= ends.get(partition)!.high) pending.delete(partition);
    });
    await reader.connect();
    try {
      await subscribeWhenKnown(reader, { topics: [changelog], fromBeginning: true });
      await reader.run({
        eachBatch: async ({ batch }) => {
          const target = restored.get(batch.partition);
          if (!target) return;
          for (const m of batch.messages) {
            if (BigInt(m.offset) >= ends.get(batch.partition)!.high) break;
            target.layout.restore(m.key!.toString('utf8'), m.value, (key, value) => {
              processor.restore(target.state, key, value);
              entries++;
            });
          }
        },
      });
      // Taking the ids ended the previous owners' transactions; the wait is for the end to be readable.
      const until = Date.now() + opts.transactionTimeoutMs + 30_000;
      while (pending.size > 0) {
        if (Date.now() > until) throw new Error(`changelog restore did not reach the end of partitions ${[...pending].join(', ')}`);
        await new Promise((r) => setTimeout(r, 50));
        await opts.heartbeat().catch((err: unknown) => log.debug({ err }, 'heartbeat failed while restoring'));
      }
    } finally {
      await reader.disconnect();
      await admin.deleteGroups([groupId]).catch((err: unknown) => log.debug({ err, groupId }, 'could not delete the restore group'));
    }
  }
  for (const t of await admin.fetchOffsets({ groupId: opts.group, topics: processor.inputs })) {
    for (const p of t.partitions) restored.get(p.partition)?.committed.set(t.topic, BigInt(Math.max(0, Number(p.offset))));
  }
  return { restored, entries };
}
