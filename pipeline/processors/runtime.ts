import { randomUUID } from 'node:crypto';
import { AssignerProtocol, type Admin, type Consumer, type EachBatchPayload, type Kafka, type PartitionAssigner, type Producer, Partitioners } from 'kafkajs';
import { changelogTopicName, decodeEventsOfTypes, type CanonicalEvent, type EventType } from '../../lib/events.js';
import { createMissingTopics, inSends, subscribeWhenKnown } from '../../lib/kafka.js';
import type { Logger } from '../../lib/logger.js';
import { describeError } from '../sink/dead-letter.js';
import { ChangelogLayout } from './changelog.js';

/**
 * The stream-processor runtime (docs/processors.md): each processor is one Kafka consumer group
 * over its input topics, with its state per input partition kept in memory and written to a
 * compacted changelog topic (state of input partition p → changelog partition p; entries grouped
 * into a few records per transaction, see changelog.ts). What a partition's batches produce is held
 * and committed at most the processor's commit interval later (Kafka Streams' commit.interval.ms),
 * in one Kafka transaction: the outputs, the changelog entries changed since the last commit and
 * the consumed offsets (`sendOffsets`) commit together or not at all, and everything downstream
 * reads committed only. The transactional id belongs to the input partition, not to the process: whoever takes
 * partition p (a restarted instance after a kill -9, or another member after a rebalance) first
 * initialises p's id, which fences the previous owner and completes or aborts its open
 * transaction, then restores p's state from the changelog and resumes at p's committed offset:
 * every input is reflected exactly once in state and outputs, and a member that has not yet
 * noticed it lost p can no longer commit anything for it.
 * Wall-clock timers (`tick`) run under the same lock; what they produce commits with the partition's
 * next commit.
 */

export interface InputMessage {
  topic: string;
  partition: number;
  offset: string;
  value: Buffer | null;
  headers?: Record<string, unknown>;
}

/**
 * The events of `types` in a batch of events-topic messages, in order. What cannot be read is
 * skipped with a log line: the events sink dead-letters it, and nothing here could count it.
 */
export function eventsOfTypes(messages: InputMessage[], types: ReadonlySet<EventType>, ctx: ProcessorContext, processor: string): CanonicalEvent[] {
  const events: CanonicalEvent[] = [];
  for (const m of messages) {
    try {
      const got = decodeEventsOfTypes(m, types);
      for (const e of got.events) events.push(e);
      if (got.invalid > 0) ctx.log.warn({ partition: m.partition, offset: m.offset, invalid: got.invalid }, `${processor}: events not in the contract skipped`);
    } catch (err) {
      ctx.log.warn({ partition: m.partition, offset: m.offset, err: describeError(err) }, `${processor}: undecodable message skipped`);
    }
  }
  return events;
}

export interface Output {
  topic: string;
  key: string;
  value: Buffer;
}

export interface Effects {
  outputs: Output[];
  /** Keys of the state entries changed or deleted: the changelog stores each one's `entry` as of the transaction. */
  changed: Set<string>;
}

export interface ProcessorContext {
  partition: number;
  /** Wall clock, epoch ms. */
  now: number;
  /** True when every input partition p was read to its end (so wall-clock timers may act). */
  caughtUp: boolean;
  log: Logger;
}

export interface Processor<S> {
  readonly name: string;
  /** Topics read, partitioned like the events topic (same count, keyed by venue). */
  readonly inputs: string[];
  createState(): S;
  /** Applies a changelog entry while restoring (null: the entry was deleted). */
  restore(state: S, key: string, value: Buffer | null): void;
  /** The changelog value of an entry as held now (null: none). */
  entry(state: S, key: string): Buffer | null;
  /** Handles a batch of one input partition; state is changed in place, the keys changed returned. */
  process(state: S, messages: InputMessage[], ctx: ProcessorContext): Promise<Effects>;
  /** Wall-clock timers of one partition. */
  tick(state: S, ctx: ProcessorContext): Promise<Effects>;
  /** Entries held, for stats. */
  size(state: S): number;
  /**
   * How long a partition's processed input may wait for its transaction: its batches within that
   * time commit together, and their outputs become visible at the commit. A transaction costs the
   * broker and the pipeline about ten requests whatever it holds.
   */
  readonly commitIntervalMs: number;
}

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

/**
 * Assigns partition p of every input topic to the same member, so a processor sees all of a
 * venue's inputs (events, ingest reports) with one state. Members take partitions round robin in
 * member-id order.
 */
const coPartitioned: PartitionAssigner = ({ cluster }) => ({
  name: 'CoPartitioned',
  version: 1,
  async assign({ members, topics }) {
    const ids = members.map((m) => m.memberId).sort();
    const byMember = new Map<string, Record<string, number[]>>(ids.map((id) => [id, {}]));
    for (const topic of topics) {
      for (const { partitionId } of cluster.findTopicPartitionMetadata(topic)) {
        const owner = byMember.get(ids[partitionId % ids.length]!)!;
        (owner[topic] ??= []).push(partitionId);
      }
    }
    return ids.map((memberId) => ({
      memberId,
      memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 1, assignment: byMember.get(memberId)!, userData: Buffer.alloc(0) }),
    }));
  },
  protocol({ topics }) {
    return { name: 'CoPartitioned', metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData: Buffer.alloc(0) }) };
  },
});

/** What a partition processed since its last commit. */
interface Held {
  outputs: Output[];
  changed: Set<string>;
  /** Next offset per input topic. */
  offsets: Map<string, bigint>;
}

/** A partition holding this many outputs and changed entries commits without waiting for the interval. */
const MAX_HELD = 20_000;

export class ProcessorRuntime<S> {
  readonly group: string;
  readonly changelog: string;
  readonly stats: ProcessorStats = { batches: 0, messages: 0, transactions: 0, aborts: 0, restores: 0, stateEntries: 0 };
  private readonly log: Logger;
  private readonly states = new Map<number, S>();
  /** Where each partition's state entries are in the changelog (created by the restore, with the state). */
  private readonly layouts = new Map<number, ChangelogLayout>();
  private assigned = new Set<number>();
  /** Next offset to read per `topic:partition`: what the state in memory reflects. */
  private readonly position = new Map<string, bigint>();
  /** Next offset per `topic:partition` as of the last commit: where a partition whose held work is lost reads again. */
  private readonly committed = new Map<string, bigint>();
  private readonly held = new Map<number, Held>();
  private readonly commitIntervalMs: number;
  private readonly ends = new Map<string, bigint>();
  private chain: Promise<unknown> = Promise.resolve();
  /** The transactional producer of each partition held; created (fencing any other) by the restore. */
  private readonly producers = new Map<number, Producer>();
  private consumer?: Consumer;
  private admin?: Admin;
  private readonly timers = new Set<NodeJS.Timeout>();
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
    this.admin = kafka.admin();
    await this.admin.connect();
    await createMissingTopics(this.admin, [
      { topic: this.changelog, numPartitions: this.opts.partitions, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] },
    ]);
    const consumer = kafka.consumer({
      groupId: this.group,
      sessionTimeout: this.opts.sessionTimeoutMs ?? 10_000,
      heartbeatInterval: 1_000,
      maxWaitTimeInMs: 250,
      // Up to 4 MB per partition and fetch: when each fetched batch was its own transaction, at
      // kafkajs's 1 MB default the commits, not the processing, bounded a processor's rate.
      maxBytesPerPartition: 4 * 1024 * 1024,
      readUncommitted: false,
      partitionAssigners: [coPartitioned],
      retry: { retries: 10, initialRetryTime: 300, maxRetryTime: 10_000 },
    });
    this.consumer = consumer;
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      const assignment = e.payload.memberAssignment as Record<string, number[]>;
      const partitions = new Set(this.processor.inputs.flatMap((t) => assignment[t] ?? []));
      this.log.info({ partitions: [...partitions] }, 'joined group');
      // Another member may have changed any partition meanwhile: restore from the changelog (and
      // take each partition's transactional id again) before its next batch or timer.
      void this.exclusive(async () => {
        this.assigned = partitions;
        // Held work is not committed: the group reads those partitions again from their commits.
        this.states.clear();
        this.layouts.clear();
        this.held.clear();
        await Promise.all([...this.producers.keys()].map((p) => this.dropProducer(p)));
      });
    });
    consumer.on(consumer.events.CRASH, (e) => this.log.error({ err: e.payload.error, restart: e.payload.restart }, 'processor consumer crashed'));
    await consumer.connect();
    await subscribeWhenKnown(consumer, { topics: this.processor.inputs, fromBeginning: true });
    await consumer.run({ autoCommit: false, eachBatchAutoResolve: false, partitionsConsumedConcurrently: 1, eachBatch: this.eachBatch });
    this.every(this.opts.tickMs ?? 5_000, () => this.tick(), 'processor tick failed; state is restored before the next one');
    this.every(this.commitIntervalMs, () => this.commitAll(), 'processor commit round failed; what is held commits at the next one');
  }

  /** Runs `work` under the lock every `ms` after the previous run ended, until stopped. */
  private every(ms: number, work: () => Promise<void>, failed: string): void {
    const next = () => {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        void this.exclusive(work)
          .catch((err: unknown) => this.log.warn({ err: describeError(err) }, failed))
          .finally(() => {
            if (!this.stopped) next();
          });
      }, ms);
      this.timers.add(timer);
    };
    next();
  }

  /** Stops timers and fetching, commits what is held, leaves the group, closes. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    // Batches queued behind this see `stopped` and leave their input uncommitted for the next owner.
    await this.exclusive(async () => {
      await this.commitAll();
      this.stats.stateEntries = this.stateSize();
    });
    await this.consumer?.stop();
    await this.consumer?.disconnect();
    await Promise.all([...this.producers.keys()].map((p) => this.dropProducer(p)));
    await this.admin?.disconnect();
    this.log.info({ stats: this.stats }, 'processor stopped');
  }

  /** Entries held over all partitions. */
  stateSize(): number {
    let n = 0;
    for (const s of this.states.values()) n += this.processor.size(s);
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
      if (!this.states.has(p)) {
        // Never start a partition from empty state: it is restored even if the join event was missed.
        this.assigned.add(p);
        try {
          await this.restore(payload.heartbeat);
        } catch (err) {
          this.log.error({ err: describeError(err) }, 'state restore failed; kafkajs retries the batch');
          throw err;
        }
      }
      const state = this.states.get(p)!;
      const next = BigInt(batch.lastOffset()) + 1n;
      // The consumer may have fetched from an offset read before the previous owner's last commit
      // was complete; what the restored state already reflects is skipped.
      const from = this.position.get(`${batch.topic}:${p}`) ?? 0n;
      const messages = batch.messages.filter((m) => BigInt(m.offset) >= from);
      const ctx: ProcessorContext = { partition: p, now: Date.now(), caughtUp: false, log: this.log };
      try {
        if (messages.length > 0) {
          const effects = await this.processor.process(
            state,
            messages.map((m) => ({ topic: batch.topic, partition: p, offset: m.offset, value: m.value, headers: m.headers })),
            ctx,
          );
          const held = this.hold(p, effects);
          held.offsets.set(batch.topic, next);
          if (held.outputs.length + held.changed.size >= MAX_HELD) await this.commit(p);
        }
      } catch (err) {
        await this.rewind(p, err, 'batch failed');
        return;
      }
      this.position.set(`${batch.topic}:${p}`, next > from ? next : from);
      this.ends.set(`${batch.topic}:${p}`, BigInt(batch.highWatermark));
      payload.resolveOffset(batch.lastOffset());
      this.stats.batches++;
      this.stats.messages += batch.messages.length;
    });
    // A failed heartbeat means a rebalance is under way: kafkajs rejoins, the join handler drops the state.
    await payload.heartbeat().catch((err: unknown) => this.log.debug({ err: describeError(err) }, 'heartbeat failed after a batch'));
  };

  /** Wall-clock timers of every restored partition; their effects commit with the partition's next commit. */
  private async tick(): Promise<void> {
    if (this.stopped) return;
    // Partitions without a batch since the join get their state here, so their timers run too.
    if ([...this.assigned].some((p) => !this.states.has(p))) await this.restore(async () => undefined);
    await this.refreshEnds();
    const now = Date.now();
    for (const [p, state] of this.states) {
      const ctx: ProcessorContext = { partition: p, now, caughtUp: this.caughtUp(p), log: this.log };
      const effects = await this.processor.tick(state, ctx);
      if (effects.outputs.length > 0 || effects.changed.size > 0) this.hold(p, effects);
    }
    this.stats.stateEntries = this.stateSize();
    if (now - this.loggedAt >= 60_000) {
      this.loggedAt = now;
      this.log.info({ stats: this.stats, rssMb: Math.round(process.memoryUsage().rss / 1048576) }, 'processor stats');
    }
  }

  /** Adds a batch's or a timer's effects to what partition p holds for its next commit. */
  private hold(p: number, effects: Effects): Held {
    let held = this.held.get(p);
    if (!held) this.held.set(p, (held = { outputs: [], changed: new Set(), offsets: new Map() }));
    for (const o of effects.outputs) held.outputs.push(o);
    for (const k of effects.changed) held.changed.add(k);
    return held;
  }

  /** Commits what partition p holds: its outputs, the entries changed since its last commit and the offsets read. */
  private async commit(p: number): Promise<void> {
    const held = this.held.get(p);
    if (!held) return;
    const offsets = [...held.offsets].map(([topic, next]) => ({ topic, partition: p, offset: next.toString() }));
    await this.transact(p, held, offsets);
    this.held.delete(p);
    for (const [topic, next] of held.offsets) this.committed.set(`${topic}:${p}`, next);
  }

  /** The commit interval's end: every partition's held work, one transaction each. */
  private async commitAll(): Promise<void> {
    for (const p of [...this.held.keys()]) {
      try {
        await this.commit(p);
      } catch (err) {
        await this.rewind(p, err, 'commit failed');
      }
    }
  }

  /**
   * After a failed batch or commit: p's state may hold what did not commit, so it is forgotten
   * (restored before p's next batch) with what p held, and p's inputs are read again from their last
   * commit. A pending seek makes the consumer skip whatever it had already fetched of p.
   */
  private async rewind(p: number, err: unknown, what: string): Promise<void> {
    await this.dropPartition(p);
    if (fenced(err)) this.log.info({ partition: p }, `${what}: partition taken over by another member; its input is left to it`);
    else this.log.warn({ partition: p, err: describeError(err) }, `${what}: aborted, state dropped, input read again from the last commit`);
    const inputs = this.processor.inputs.map((topic) => ({ topic, partitions: [p] }));
    try {
      this.consumer?.pause(inputs);
      for (const topic of this.processor.inputs) {
        this.consumer?.seek({ topic, partition: p, offset: (this.committed.get(`${topic}:${p}`) ?? 0n).toString() });
      }
    } catch (e) {
      // Not assigned any more (a rebalance): its new owner reads it from the last commit.
      this.log.debug({ partition: p, err: describeError(e) }, 'no rewind: the partition is no longer this member\'s');
    }
    setTimeout(() => {
      try {
        this.consumer?.resume(inputs);
      } catch (e) {
        this.log.debug({ err: describeError(e) }, 'resume after a rewind skipped: the consumer stopped');
      }
    }, 1000).unref();
  }

  private caughtUp(p: number): boolean {
    return this.processor.inputs.every((t) => {
      const end = this.ends.get(`${t}:${p}`);
      const at = this.position.get(`${t}:${p}`);
      // An empty partition has nothing to catch up on.
      return end !== undefined && (end === 0n || (at !== undefined && at >= end));
    });
  }

  private async refreshEnds(): Promise<void> {
    for (const topic of this.processor.inputs) {
      for (const o of await this.admin!.fetchTopicOffsets(topic)) this.ends.set(`${topic}:${o.partition}`, BigInt(o.high));
    }
  }

  /**
   * Takes partition p's transactional id: initialising it bumps the id's epoch, so a previous owner
   * (a killed instance, or a member that lost p in a rebalance) can no longer commit, and the broker
   * completes or aborts whatever it left open before answering. (kafkajs initialises the id on the
   * first transaction, not on connect; an empty one is aborted without a round trip.)
   */
  private async takeTransactionalId(p: number): Promise<void> {
    await this.dropProducer(p);
    const producer = this.opts.kafka.producer({
      transactionalId: `${this.group}.p${p}`,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: this.opts.transactionTimeoutMs ?? 10_000,
      allowAutoTopicCreation: false,
      // Every message names its partition (the input's): the partitioner is never asked.
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    try {
      await producer.connect();
      await (await producer.transaction()).abort();
    } catch (err) {
      await producer.disconnect().catch((e: unknown) => this.log.debug({ err: describeError(e) }, 'producer that failed to initialise did not disconnect cleanly'));
      throw err;
    }
    this.producers.set(p, producer);
  }

  private async dropProducer(p: number): Promise<void> {
    const producer = this.producers.get(p);
    this.producers.delete(p);
    await producer?.disconnect().catch((e: unknown) => this.log.debug({ err: describeError(e), partition: p }, 'transactional producer did not disconnect cleanly'));
  }

  /**
   * After a failed transaction: p's state may hold what did not commit, and kafkajs's producer may
   * be stuck in COMMITTING or ABORTING (a commit that never got its answer, e.g. while the broker
   * restarted, refusing every later transaction: the chaos runner's Kafka stop left the processors
   * there for good). Both go; the next batch or timer restores p, taking its id again, which has
   * the broker abort what was left open.
   */
  private async dropPartition(p: number): Promise<void> {
    this.states.delete(p);
    this.layouts.delete(p);
    this.held.delete(p);
    await this.dropProducer(p);
  }

  /** Partition p's outputs and changelog entries, and consumed offsets, in one transaction. */
  private async transact(p: number, effects: Effects, offsets: Array<{ topic: string; partition: number; offset: string }>): Promise<void> {
    const producer = this.producers.get(p);
    const state = this.states.get(p);
    const layout = this.layouts.get(p);
    if (!producer || state === undefined || !layout) throw new Error(`partition ${p} has no transactional producer; it is restored first`);
    const changelog = layout.write(effects.changed, (key) => this.processor.entry(state, key));
    const topicMessages = [
      ...groupByTopic(effects.outputs.map((o) => ({ topic: o.topic, key: o.key, value: o.value, partition: p }))),
      ...(changelog.length > 0 ? [{ topic: this.changelog, messages: changelog.map((c) => ({ key: c.key, value: c.value, partition: p })) }] : []),
    ];
    const txn = await producer.transaction();
    try {
      for (const send of inSends(topicMessages)) await txn.sendBatch({ acks: -1, topicMessages: send });
      if (offsets.length > 0) {
        const topics = [...new Set(offsets.map((o) => o.topic))].map((topic) => ({
          topic,
          partitions: offsets.filter((o) => o.topic === topic).map(({ partition, offset }) => ({ partition, offset })),
        }));
        await whileConcurrent(() => txn.sendOffsets({ consumerGroupId: this.group, topics }));
      }
      await txn.commit();
      this.stats.transactions++;
    } catch (err) {
      this.stats.aborts++;
      await txn.abort().catch((e: unknown) => {
        if (fenced(e)) this.log.debug({ partition: p }, 'abort refused: the transaction was ended by the fencing');
        else this.log.warn({ err: describeError(e) }, 'abort failed; the next owner of the id has the broker abort it');
      });
      throw err;
    }
  }

  /**
   * Rebuilds the state of every assigned partition not held: a throwaway consumer group reads the
   * changelog (committed entries only) from the beginning up to the end offsets taken now, keeping
   * the entries of those partitions. Also reads the group's committed input offsets.
   */
  private async restore(heartbeat: () => Promise<void>): Promise<void> {
    const wanted = [...this.assigned].filter((p) => !this.states.has(p));
    if (wanted.length === 0) return;
    const started = Date.now();
    const admin = this.admin!;
    // First the ids: nothing of the previous owners' may commit after the changelog and offsets are read.
    await Promise.all(wanted.map((p) => this.takeTransactionalId(p)));
    const ends = new Map((await admin.fetchTopicOffsets(this.changelog)).map((o) => [o.partition, { low: BigInt(o.low), high: BigInt(o.high) }]));
    const states = new Map(wanted.map((p) => [p, this.processor.createState()]));
    const layouts = new Map(wanted.map((p) => [p, new ChangelogLayout()]));
    const pending = new Set(wanted.filter((p) => (ends.get(p)?.high ?? 0n) > (ends.get(p)?.low ?? 0n)));
    let entries = 0;
    if (pending.size > 0) {
      const groupId = `${this.group}.restore.${randomUUID()}`;
      const reader = this.opts.kafka.consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 100, sessionTimeout: 10_000 });
      reader.on(reader.events.END_BATCH_PROCESS, (e) => {
        const { partition, lastOffset } = e.payload;
        if (pending.has(partition) && BigInt(lastOffset) + 1n >= ends.get(partition)!.high) pending.delete(partition);
      });
      await reader.connect();
      try {
        await subscribeWhenKnown(reader, { topics: [this.changelog], fromBeginning: true });
        await reader.run({
          eachBatch: async ({ batch }) => {
            const state = states.get(batch.partition);
            const layout = layouts.get(batch.partition);
            if (!state || !layout) return;
            for (const m of batch.messages) {
              if (BigInt(m.offset) >= ends.get(batch.partition)!.high) break;
              layout.restore(m.key!.toString('utf8'), m.value, (key, value) => {
                this.processor.restore(state, key, value);
                entries++;
              });
            }
          },
        });
        // Taking the ids ended the previous owners' transactions; the wait is for the end to be readable.
        const until = Date.now() + (this.opts.transactionTimeoutMs ?? 10_000) + 30_000;
        while (pending.size > 0) {
          if (Date.now() > until) throw new Error(`changelog restore did not reach the end of partitions ${[...pending].join(', ')}`);
          await new Promise((r) => setTimeout(r, 50));
          await heartbeat().catch((err: unknown) => this.log.debug({ err: describeError(err) }, 'heartbeat failed while restoring'));
        }
      } finally {
        await reader.disconnect();
        await admin.deleteGroups([groupId]).catch((err: unknown) => this.log.debug({ err: describeError(err), groupId }, 'could not delete the restore group'));
      }
    }
    for (const t of await admin.fetchOffsets({ groupId: this.group, topics: this.processor.inputs })) {
      for (const p of t.partitions) {
        if (!states.has(p.partition)) continue;
        const at = BigInt(Math.max(0, Number(p.offset)));
        this.position.set(`${t.topic}:${p.partition}`, at);
        this.committed.set(`${t.topic}:${p.partition}`, at);
      }
    }
    for (const [p, s] of states) {
      this.states.set(p, s);
      this.layouts.set(p, layouts.get(p)!);
    }
    this.stats.restores++;
    this.log.info({ partitions: wanted, entries, ms: Date.now() - started }, 'state restored from the changelog');
  }
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

/** The transactional id was taken by another producer (a member that now owns the partition). */
function fenced(err: unknown): boolean {
  const type = (err as { type?: unknown; originalError?: { type?: unknown } } | undefined)?.type ?? (err as { originalError?: { type?: unknown } } | undefined)?.originalError?.type;
  return type === 'INVALID_PRODUCER_EPOCH' || type === 'PRODUCER_FENCED';
}

function groupByTopic(messages: Array<{ topic: string; key: string; value: Buffer; partition: number }>): Array<{ topic: string; messages: Array<{ key: string; value: Buffer; partition: number }> }> {
  const byTopic = new Map<string, Array<{ key: string; value: Buffer; partition: number }>>();
  for (const { topic, ...m } of messages) {
    let list = byTopic.get(topic);
    if (!list) byTopic.set(topic, (list = []));
    list.push(m);
  }
  return [...byTopic].map(([topic, list]) => ({ topic, messages: list }));
}
