import type { Producer } from 'kafkajs';
import type { Logger } from '../../lib/logger.js';
import type { ChangelogLayout } from './changelog.js';
import type { Effects, Output, Processor, ProcessorContext } from './processor.js';
import { closeProducer, commitTransaction, type PartitionRecord, type TransactionCounters } from './transaction.js';

/** A partition holding this many outputs and changed entries commits without waiting for the interval. */
export const MAX_HELD = 20_000;

/** What a partition processed since its last commit. */
interface Held {
  outputs: Output[];
  changed: Set<string>;
  /** Next offset per input topic. */
  offsets: Map<string, bigint>;
}

/** A fetched batch of one input topic of the task's partition. */
export interface TaskBatch {
  topic: string;
  messages: Array<{ offset: string; value: Buffer | null; headers?: Record<string, unknown> }>;
  lastOffset: string;
  highWatermark: string;
}

export interface PartitionTaskOptions<S> {
  processor: Processor<S>;
  partition: number;
  state: S;
  layout: ChangelogLayout;
  /** The partition's transactional producer, its id already taken (which fenced any previous owner). */
  producer: Producer;
  /** Next offset per input topic as of the group's last commit. */
  committed: Map<string, bigint>;
  group: string;
  changelog: string;
  counters: TransactionCounters;
  log: Logger;
}

/**
 * One input partition as this member owns it (Kafka Streams' StreamTask): the processor's state, its
 * changelog layout, its transactional producer, the work held for the next commit and the positions
 * of its inputs. It exists from the restore until the partition is lost, rewound or stopped; a task
 * whose transaction failed is closed, never reused, and the partition restored anew.
 */
export class PartitionTask<S> {
  readonly partition: number;
  readonly state: S;
  private readonly processor: Processor<S>;
  private readonly layout: ChangelogLayout;
  private readonly producer: Producer;
  private readonly opts: PartitionTaskOptions<S>;
  private held?: Held;
  /** Next offset to read per input topic: what the state reflects. */
  private readonly position: Map<string, bigint>;
  /** Next offset per input topic as of the last commit: where the partition reads again when its held work is lost. */
  private readonly committed: Map<string, bigint>;
  /** End offset per input topic, last seen. */
  private readonly ends = new Map<string, bigint>();

  constructor(opts: PartitionTaskOptions<S>) {
    this.opts = opts;
    this.partition = opts.partition;
    this.state = opts.state;
    this.processor = opts.processor;
    this.layout = opts.layout;
    this.producer = opts.producer;
    this.committed = new Map(opts.committed);
    this.position = new Map(opts.committed);
  }

  /**
   * Processes a batch and holds its effects; commits at once when MAX_HELD is reached. Throws when
   * processing or that commit fails: the task is then closed and the partition rewound.
   */
  async process(batch: TaskBatch, now: number): Promise<void> {
    const next = BigInt(batch.lastOffset) + 1n;
    // The consumer may have fetched from an offset read before the previous owner's last commit
    // was complete; what the restored state already reflects is skipped.
    const from = this.position.get(batch.topic) ?? 0n;
    const messages = batch.messages.filter((m) => BigInt(m.offset) >= from);
    if (messages.length > 0) {
      const ctx: ProcessorContext = { partition: this.partition, now, caughtUp: false, log: this.opts.log };
      const input = messages.map((m) => ({
        topic: batch.topic,
        partition: this.partition,
        offset: m.offset,
        value: m.value,
        headers: m.headers,
      }));
      const held = this.hold(await this.processor.process(this.state, input, ctx));
      held.offsets.set(batch.topic, next);
      if (held.outputs.length + held.changed.size >= MAX_HELD) await this.commit();
    }
    this.position.set(batch.topic, next > from ? next : from);
    this.ends.set(batch.topic, BigInt(batch.highWatermark));
  }

  /** Runs the processor's wall-clock timers; their effects commit with the next commit. */
  async tick(now: number): Promise<void> {
    const ctx: ProcessorContext = { partition: this.partition, now, caughtUp: this.caughtUp(), log: this.opts.log };
    const effects = await this.processor.tick(this.state, ctx);
    if (effects.outputs.length > 0 || effects.changed.size > 0) this.hold(effects);
  }

  get holding(): boolean {
    return this.held !== undefined;
  }

  /** Commits what is held: its outputs, the entries changed since the last commit and the offsets read, in one transaction. */
  async commit(): Promise<void> {
    const held = this.held;
    if (!held) return;
    const records: PartitionRecord[] = held.outputs.map((o) => ({ topic: o.topic, key: o.key, value: o.value }));
    for (const c of this.layout.write(held.changed, (key) => this.processor.entry(this.state, key)))
      records.push({ topic: this.opts.changelog, key: c.key, value: c.value });
    await commitTransaction(this.producer, this.partition, records, held.offsets, this.opts.group, this.opts.counters, this.opts.log);
    this.held = undefined;
    for (const [topic, next] of held.offsets) this.committed.set(topic, next);
  }

  /** Where each input is read again when what is held is lost: the offsets of the last commit. */
  committedOffsets(): ReadonlyMap<string, bigint> {
    return this.committed;
  }

  setEnd(topic: string, end: bigint): void {
    this.ends.set(topic, end);
  }

  /** True when every input was read to its end as last seen. */
  caughtUp(): boolean {
    return this.processor.inputs.every((t) => {
      const end = this.ends.get(t);
      const at = this.position.get(t);
      // An empty partition has nothing to catch up on.
      return end !== undefined && (end === 0n || (at !== undefined && at >= end));
    });
  }

  size(): number {
    return this.processor.size(this.state);
  }

  /**
   * Lets go of the transactional producer; what is held is dropped uncommitted. After a failed
   * transaction kafkajs's producer may be stuck in COMMITTING or ABORTING (a commit that never got
   * its answer), refusing every later transaction; the partition's next owner (this member's next
   * task included) takes the id again, which has the broker abort what was left open.
   */
  async close(): Promise<void> {
    this.held = undefined;
    await closeProducer(this.producer, this.opts.log, this.partition);
  }

  private hold(effects: Effects): Held {
    const held: Held = (this.held ??= { outputs: [], changed: new Set<string>(), offsets: new Map<string, bigint>() });
    for (const o of effects.outputs) held.outputs.push(o);
    for (const k of effects.changed) held.changed.add(k);
    return held;
  }
}
