import type { Admin, Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { changelogTopicName } from '../../lib/topology.js';
import { consumerOptions, subscribeWhenKnown, topicOffsets } from '../../lib/kafka.js';
import type { Logger } from '../../lib/logger.js';
import { every } from '../../lib/timers.js';
import { coPartitioned } from './assignor.js';
import { PartitionTask } from './partition-task.js';
import type { Processor } from './processor.js';
import { restoreTasks, type RestoreOptions } from './restore.js';
import { fenced } from './transaction.js';

/**
 * The stream-processor runtime (docs/processors.md): each processor is one Kafka consumer group
 * over its input topics, with one `PartitionTask` per input partition it owns (state in memory,
 * written to a compacted changelog, state of input partition p → changelog partition p). What a
 * partition's batches produce is held and committed at most the processor's commit interval later
 * (Kafka Streams' commit.interval.ms), in one Kafka transaction: the outputs, the changelog entries
 * changed since the last commit and the consumed offsets commit together or not at all, and
 * everything downstream reads committed only. The transactional id belongs to the input partition,
 * not to the process: whoever takes partition p (a restarted instance after a kill -9, or another
 * member after a rebalance) first initialises p's id, which fences the previous owner and completes
 * or aborts its open transaction, then restores p's state from the changelog and resumes at p's
 * committed offset: every input is reflected exactly once in state and outputs, and a member that
 * has not yet noticed it lost p can no longer commit anything for it.
 * Batches, wall-clock timers (`tick`) and commits run one at a time under one lock; what a timer
 * produces commits with the partition's next commit.
 */

export interface RuntimeOptions {
  kafka: Kafka;
  log: Logger;
  /** Topic prefix: the group is `<prefix>.proc.<name>`, the changelog `<prefix>.proc.<name>.changelog.v1`. */
  prefix: string;
  /** Partitions of the inputs (and of the changelog and outputs). */
  partitions: number;
  tickMs?: number;
  /** Overrides the processor's own commit interval. */
  commitIntervalMs?: number;
  transactionTimeoutMs?: number;
  sessionTimeoutMs?: number;
}

export interface ProcessorStats {
  batches: number;
  messages: number;
  transactions: number;
  aborts: number;
  restores: number;
  stateEntries: number;
}

export class ProcessorRuntime<S> {
  readonly group: string;
  readonly changelog: string;
  readonly stats: ProcessorStats = { batches: 0, messages: 0, transactions: 0, aborts: 0, restores: 0, stateEntries: 0 };
  private readonly log: Logger;
  private readonly commitIntervalMs: number;
  /** What every restore is given; set once the admin client is connected. */
  private restoreWith?: Omit<RestoreOptions<S>, 'partitions' | 'heartbeat'>;
  /** The partitions of the last assignment (and any a batch arrived for since). */
  private assigned = new Set<number>();
  /** The task of every assigned partition restored and not since dropped. */
  private readonly tasks = new Map<number, PartitionTask<S>>();
  private chain: Promise<unknown> = Promise.resolve();
  private consumer?: Consumer;
  private admin?: Admin;
  private readonly timers: Array<{ stop(): Promise<void> }> = [];
  private stopped = false;
  private loggedAt = Date.now();

  constructor(
    private readonly processor: Processor<S>,
    private readonly opts: RuntimeOptions,
  ) {
    this.group = `${opts.prefix}.proc.${processor.name}`;
    this.changelog = changelogTopicName(opts.prefix, processor.name);
    this.log = opts.log.child({ component: 'processor', processor: processor.name });
    this.commitIntervalMs = opts.commitIntervalMs ?? processor.commitIntervalMs;
  }

  async start(): Promise<void> {
    const { kafka } = this.opts;
    const admin = (this.admin = kafka.admin());
    await admin.connect();
    const { processor, changelog, group, log, stats: counters } = this;
    const transactionTimeoutMs = this.opts.transactionTimeoutMs ?? 10_000;
    this.restoreWith = { kafka, admin, processor, changelog, group, log, counters, transactionTimeoutMs };
    const consumer = kafka.consumer(
      consumerOptions('bulk', { groupId: this.group, sessionTimeout: this.opts.sessionTimeoutMs, partitionAssigners: [coPartitioned] }),
    );
    this.consumer = consumer;
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      const assignment = e.payload.memberAssignment as Record<string, number[]>;
      const partitions = new Set(this.processor.inputs.flatMap((t) => assignment[t] ?? []));
      this.log.info({ partitions: [...partitions] }, 'joined group');
      // Another member may have changed any partition meanwhile: every task is dropped (held work is
      // not committed; the group reads those partitions again from their commits) and restored,
      // taking its transactional id again, before its next batch or timer.
      void this.exclusive(async () => {
        this.assigned = partitions;
        await this.dropTasks();
      });
    });
    consumer.on(consumer.events.CRASH, (e) =>
      this.log.error({ err: e.payload.error, restart: e.payload.restart }, 'processor consumer crashed'),
    );
    await consumer.connect();
    await subscribeWhenKnown(consumer, { topics: this.processor.inputs, fromBeginning: true });
    await consumer.run({ autoCommit: false, eachBatchAutoResolve: false, partitionsConsumedConcurrently: 1, eachBatch: this.eachBatch });
    const warn = (what: string) => ({ onError: (err: unknown) => this.log.warn({ err }, what) });
    this.timers.push(
      every(
        this.opts.tickMs ?? 5_000,
        () => this.exclusive(() => this.tick()),
        warn('processor tick failed; state is restored before the next one'),
      ),
      every(
        this.commitIntervalMs,
        () => this.exclusive(() => this.commitAll()),
        warn('processor commit round failed; what is held commits at the next one'),
      ),
    );
  }

  /** Stops timers and fetching, commits what is held, leaves the group, closes. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.timers.map((t) => t.stop()));
    // Batches queued behind this see `stopped` and leave their input uncommitted for the next owner.
    await this.exclusive(async () => {
      await this.commitAll();
      this.stats.stateEntries = this.stateSize();
    });
    await this.consumer?.stop();
    await this.consumer?.disconnect();
    await this.dropTasks();
    await this.admin?.disconnect();
    this.log.info({ stats: this.stats }, 'processor stopped');
  }

  /** Entries held over all partitions. */
  stateSize(): number {
    let n = 0;
    for (const task of this.tasks.values()) n += task.size();
    return n;
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  private readonly eachBatch = async (payload: EachBatchPayload): Promise<void> => {
    const { batch } = payload;
    if (!payload.isRunning() || payload.isStale() || batch.messages.length === 0) return;
    await this.exclusive(async () => {
      if (this.stopped || payload.isStale()) return;
      const p = batch.partition;
      if (!this.tasks.has(p)) {
        // Never start a partition from empty state: it is restored even if the join event was missed.
        this.assigned.add(p);
        try {
          await this.restore(payload.heartbeat);
        } catch (err) {
          this.log.error({ err }, 'state restore failed; kafkajs retries the batch');
          throw err;
        }
      }
      const task = this.tasks.get(p)!;
      try {
        await task.process(
          { topic: batch.topic, messages: batch.messages, lastOffset: batch.lastOffset(), highWatermark: batch.highWatermark },
          Date.now(),
        );
      } catch (err) {
        await this.rewind(task, err, 'batch failed');
        return;
      }
      payload.resolveOffset(batch.lastOffset());
      this.stats.batches++;
      this.stats.messages += batch.messages.length;
    });
    // A failed heartbeat means a rebalance is under way: kafkajs rejoins, the join handler drops the tasks.
    await payload.heartbeat().catch((err: unknown) => this.log.debug({ err }, 'heartbeat failed after a batch'));
  };

  /** Wall-clock timers of every restored partition; their effects commit with the partition's next commit. */
  private async tick(): Promise<void> {
    if (this.stopped) return;
    // Partitions without a batch since the join get their task here, so their timers run too.
    await this.restore(async () => undefined);
    await this.refreshEnds();
    const now = Date.now();
    for (const task of this.tasks.values()) await task.tick(now);
    this.stats.stateEntries = this.stateSize();
    if (now - this.loggedAt >= 60_000) {
      this.loggedAt = now;
      this.log.info({ stats: this.stats, rssMb: Math.round(process.memoryUsage().rss / 1048576) }, 'processor stats');
    }
  }

  /** The commit interval's end: every partition's held work, one transaction each. */
  private async commitAll(): Promise<void> {
    for (const task of [...this.tasks.values()]) {
      if (!task.holding) continue;
      try {
        await task.commit();
      } catch (err) {
        await this.rewind(task, err, 'commit failed');
      }
    }
  }

  /**
   * After a failed batch or commit: the task's state may hold what did not commit, so the task is
   * closed (the partition is restored before its next batch) and its inputs are read again from
   * their last commit. A pending seek makes the consumer skip whatever it had already fetched.
   */
  private async rewind(task: PartitionTask<S>, err: unknown, what: string): Promise<void> {
    const p = task.partition;
    this.tasks.delete(p);
    await task.close();
    if (fenced(err)) this.log.info({ partition: p }, `${what}: partition taken over by another member; its input is left to it`);
    else this.log.warn({ partition: p, err }, `${what}: aborted, state dropped, input read again from the last commit`);
    const inputs = this.processor.inputs.map((topic) => ({ topic, partitions: [p] }));
    const committed = task.committedOffsets();
    try {
      this.consumer?.pause(inputs);
      for (const topic of this.processor.inputs)
        this.consumer?.seek({ topic, partition: p, offset: (committed.get(topic) ?? 0n).toString() });
    } catch (e) {
      // Not assigned any more (a rebalance): its new owner reads it from the last commit.
      this.log.debug({ partition: p, err: e }, "no rewind: the partition is no longer this member's");
    }
    setTimeout(() => {
      try {
        this.consumer?.resume(inputs);
      } catch (e) {
        this.log.debug({ err: e }, 'resume after a rewind skipped: the consumer stopped');
      }
    }, 1000).unref();
  }

  private async refreshEnds(): Promise<void> {
    for (const topic of this.processor.inputs) {
      for (const o of await topicOffsets(this.admin!, topic, 5000)) this.tasks.get(o.partition)?.setEnd(topic, BigInt(o.high));
    }
  }

  /** Restores a task for every assigned partition without one (restore.ts). */
  private async restore(heartbeat: () => Promise<void>): Promise<void> {
    const wanted = [...this.assigned].filter((p) => !this.tasks.has(p));
    if (wanted.length === 0) return;
    const started = Date.now();
    const { tasks, entries } = await restoreTasks({ ...this.restoreWith!, partitions: wanted, heartbeat });
    for (const task of tasks) this.tasks.set(task.partition, task);
    this.stats.restores++;
    this.log.info({ partitions: wanted, entries, ms: Date.now() - started }, 'state restored from the changelog');
  }

  private async dropTasks(): Promise<void> {
    const tasks = [...this.tasks.values()];
    this.tasks.clear();
    await Promise.all(tasks.map((t) => t.close()));
  }
}
