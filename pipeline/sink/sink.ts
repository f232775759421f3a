import type { Batch, Consumer, EachBatchPayload } from 'kafkajs';
import type { Logger } from '../../lib/logger.js';
import { deadLetter } from './dead-letter.js';
import { decodeBatch } from './decode.js';
import { chunks, MAX_INSERT_ROWS, Pending, type Item } from './pending.js';
import { Ownership } from './ownership.js';
import { newSinkStats, type SinkOptions, type SinkRow, type SinkStats, type SinkTarget } from './target.js';
import { VenueContexts } from './venue-context.js';
import { ViewRepairs } from './view-repair.js';
import { mapLarge } from '../../lib/arrays.js';
import { gateRejoins } from '../../lib/kafkajs-rejoin-gate.js';

export type { Decoded, SinkOptions, SinkRow, SinkStats, SinkTarget, Undecodable } from './target.js';

/**
 * A sink: one Kafka topic → one ClickHouse table (and, through its materialized views, the tables
 * derived from it), in large batches, with an exactly-once effect. The events sink (raw events)
 * and the processors' output sinks are instances of it, each with its own `SinkTarget`. What the
 * loop guarantees, and why, in docs/pipeline.md:
 *
 * - Batches accumulate across partitions and fetches until `batchRows` rows or `batchMs`. A call
 *   returns once it has held its messages, so kafkajs goes on fetching into the batch while it
 *   waits for its deadline; a timer writes a batch that no call found due (the tail of a burst).
 *   The consumer joins its group again only after the write under way ended, and nothing held
 *   before is written after (lib/kafkajs-rejoin-gate.ts): a write never overlaps a new owner's
 *   writes of the same partition (#batching). A call that finds the batch due awaits its write, so
 *   at most one batch is written while the next one fills.
 * - Offsets are committed only after the rows are in ClickHouse; after a (re)assignment or a failed
 *   write the positions already stored are looked up and skipped, as are re-delivered vendor event
 *   ids, so a replay stores nothing twice (#offsets-replays-and-the-exactly-once-effect). Writes
 *   are serialized.
 * - While ClickHouse, Postgres or the dead-letter topic is away the write is retried, heartbeating:
 *   once the next batch is due too kafkajs fetches nothing more, keeps the membership, and nothing
 *   is committed (#pausing-while-clickhouse-is-unavailable).
 * - Poison messages go to the dead-letter topic with their reason, then are committed past
 *   (#poison-messages--dead-letter-topic).
 *
 * Beside this loop: `target.ts` (what a sink is given), `decode.ts` (messages → rows or dead
 * letters), `pending.ts` (the batch held, and its split into inserts), `stored.ts` (the look-up of
 * stored positions and re-deliveries), `ownership.ts` (when to look up), `recent-ids.ts` (the ids
 * stored lately), `run.ts` (a sink as a group member).
 */

interface Control {
  heartbeat(): Promise<void>;
  isRunning(): boolean;
  commit(offsets: Array<{ partition: number; offset: string }>): Promise<void>;
}

/** The work in hand was given up. `rethrow` goes back to kafkajs (it rejoins the group); otherwise the call just returns. */
class Abandoned extends Error {
  constructor(readonly rethrow?: unknown) {
    super('sink work abandoned');
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class Sink<R extends SinkRow> {
  readonly stats: SinkStats = newSinkStats();
  private readonly contexts: VenueContexts;
  private readonly log: Logger;
  private readonly maxRows: number;
  private readonly retry: { initialMs: number; maxMs: number };
  private consumer?: Consumer;
  /** Bumped whenever uncommitted work is dropped (rebalance, give-up): older pendings must not be written. */
  private epoch = 0;
  private current = new Pending<R>(0);
  /** Pendings holding resolved but uncommitted offsets, where a rewind has to restart. */
  private readonly uncommitted = new Set<Pending<R>>();
  /** Writes run one after another. */
  private chain: Promise<void> = Promise.resolve();
  /** Which partitions others may have written, and the ids stored lately: what must be looked up before an insert. */
  private readonly ownership: Ownership<R>;
  private active = 0;
  private draining = false;
  /** After this instant retries give up (set by drain). */
  private giveUpAt = Infinity;
  /** The control of the latest call, for a write no call awaits; the timer that starts it, and for which batch. */
  private control?: Control;
  private dueTimer?: NodeJS.Timeout;
  private timerFor?: Pending<R>;
  private readonly repairs: ViewRepairs<R>;

  constructor(
    private readonly opts: SinkOptions,
    private readonly target: SinkTarget<R>,
  ) {
    this.contexts = new VenueContexts(opts.db);
    this.log = opts.log.child({ component: 'sink', table: target.name });
    this.maxRows = Math.min(opts.batchRows, MAX_INSERT_ROWS);
    this.retry = opts.retry ?? { initialMs: 250, maxMs: 10_000 };
    this.ownership = new Ownership(target, opts.ch, opts.topics.events, this.stats, opts.recentIds);
    this.repairs = new ViewRepairs({
      ch: opts.ch,
      topic: opts.topics.events,
      target,
      log: this.log,
      stats: this.stats,
      enqueue: (step) => void (this.chain = this.chain.catch(() => undefined).then(step)),
    });
  }

  /** Rows of failed inserts whose views are not checked yet (pipeline/sink/view-repair.ts). */
  get viewRepairsPending(): number {
    return this.repairs.pending;
  }

  /** Wires the sink to its consumer before the consumer runs: group joins and rewinds. */
  attach(consumer: Consumer): void {
    this.consumer = consumer;
    gateRejoins(this.eachBatch, () => this.beforeRejoin());
    // kafkajs restarts from the committed offsets after every join (no rewind needed); what was
    // held is refetched, and another member may have written our former partitions meanwhile.
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      this.dropUncommitted('group joined', false);
      this.repairs.keepOnly(new Set(payload.memberAssignment[this.opts.topics.events] ?? []));
    });
  }

  readonly eachBatch = async (payload: EachBatchPayload): Promise<void> => {
    const { batch } = payload;
    if (!payload.isRunning() || payload.isStale() || batch.messages.length === 0) return;
    const ctl: Control = {
      heartbeat: payload.heartbeat,
      isRunning: () => payload.isRunning() && Date.now() < this.giveUpAt,
      commit: (partitions) => payload.commitOffsetsIfNecessary({ topics: [{ topic: batch.topic, partitions }] }),
    };
    this.active++;
    try {
      const items = await this.retrying(ctl, 'look up venues', () => decodeBatch(this.target, this.contexts, batch));
      // A rewind (seek) while this call was decoding makes the batch stale: kafkajs refetches it.
      if (payload.isStale()) return;
      const pending = this.current;
      this.ownership.fetched(batch.partition, batch.highWatermark);
      this.hold(pending, batch, items);
      payload.resolveOffset(batch.lastOffset());
      this.control = ctl;
      if (this.due(pending)) await this.flush(pending, ctl);
      else this.writeWhenDue(pending);
    } catch (err) {
      if (err instanceof Abandoned) {
        if (err.rethrow) throw err.rethrow;
        return;
      }
      this.dropUncommitted('unexpected error');
      throw err;
    } finally {
      this.active--;
    }
  };

  /**
   * Shutdown, before the consumer stops: stop fetching, let calls in flight write what they hold,
   * write and commit the rest. Gives up after `timeoutMs` (the rest is replayed on restart).
   */
  async drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    this.giveUpAt = Date.now() + timeoutMs;
    this.repairs.stop();
    this.stopTimer();
    const consumer = this.consumer;
    try {
      consumer?.pause([{ topic: this.opts.topics.events }]);
    } catch {
      // the consumer already stopped: nothing more is fetched anyway
    }
    while (this.active > 0) await sleep(10);
    const pending = this.current;
    if (consumer && pending.items.length > 0) {
      const ctl: Control = {
        heartbeat: async () => undefined,
        isRunning: () => Date.now() < this.giveUpAt,
        commit: (partitions) => consumer.commitOffsets(partitions.map((p) => ({ topic: this.opts.topics.events, ...p }))),
      };
      await this.flush(pending, ctl).catch((err: unknown) => {
        if (!(err instanceof Abandoned)) throw err;
        this.log.warn('could not write the held events before shutdown; they are replayed on restart');
      });
    }
    // A timer's write under way ends before the consumer leaves the group.
    await this.settled();
  }

  /** Before the member joins its group again: nothing held is written any more, and the write under way ends first. */
  private async beforeRejoin(): Promise<void> {
    this.dropUncommitted('joining the group again', false);
    await this.settled();
  }

  /** Resolves when the writes queued so far have ended, however they ended (each write's caller handles its failure). */
  private settled(): Promise<void> {
    return this.chain.catch(() => undefined);
  }

  private hold(pending: Pending<R>, batch: Batch, items: Item<R>[]): void {
    this.uncommitted.add(pending);
    pending.hold(batch, items);
  }

  private due(pending: Pending<R>): boolean {
    return this.draining || pending.rows >= this.maxRows || Date.now() - pending.firstAt >= this.opts.batchMs;
  }

  /** Writes `pending` at its deadline unless a call found it due first (the batch is then no longer current). */
  private writeWhenDue(pending: Pending<R>): void {
    if (this.timerFor === pending) return;
    this.stopTimer();
    this.timerFor = pending;
    this.dueTimer = setTimeout(
      () => {
        this.timerFor = undefined;
        if (pending !== this.current || this.draining || !this.control) return;
        this.flush(pending, this.control).catch((err: unknown) => {
          // Abandoned: what it held was dropped already (a rebalance, a stop) and is fetched again.
          if (err instanceof Abandoned) return;
          this.dropUncommitted('unexpected error');
          this.log.error({ err }, 'writing a held batch failed; its events are fetched again');
        });
      },
      Math.max(0, pending.firstAt + this.opts.batchMs - Date.now()),
    );
  }

  private stopTimer(): void {
    clearTimeout(this.dueTimer);
    this.timerFor = undefined;
  }

  /** Detaches `pending` (if current) and queues its write; every caller holding it awaits the same write. */
  private flush(pending: Pending<R>, ctl: Control): Promise<void> {
    if (pending === this.current) this.current = new Pending(this.epoch);
    pending.written ??= this.chain = this.chain.catch(() => undefined).then(() => this.write(pending, ctl));
    return pending.written;
  }

  private async write(pending: Pending<R>, given: Control): Promise<void> {
    // Dropped while queued: kafkajs refetches these messages.
    if (pending.epoch !== this.epoch) throw new Abandoned();
    // Dropped while retried (a rejoin waits for this write): it stops at its next step.
    const ctl: Control = { ...given, isRunning: () => given.isRunning() && pending.epoch === this.epoch };
    const started = Date.now();
    // Keep the session alive during long inserts: the coordinator then waits for this member to
    // rejoin (up to the rebalance timeout, longer than a ClickHouse request may take) before it
    // hands these partitions to anyone else. A failed beat surfaces at the next retry step.
    const keepAlive = setInterval(() => void ctl.heartbeat().catch(() => undefined), 1000);
    try {
      await this.retrying(ctl, 'dead-letter', () => this.sendDeadLetters(pending));
      await this.retrying(ctl, 'insert', async () => {
        const inserted = await this.insert(pending);
        if (inserted > 0) await this.opts.afterInsert?.(inserted);
      });
      await this.afterWrite(pending);
      const offsets = [...pending.commit].map(([partition, offset]) => ({ partition, offset }));
      await this.retrying(ctl, 'commit', () => ctl.commit(offsets));
    } finally {
      clearInterval(keepAlive);
    }
    this.stats.commits++;
    this.uncommitted.delete(pending);
    if (pending.epoch === this.epoch) for (const [p, next] of pending.commit) this.ownership.committed(p, BigInt(next));
    this.log.debug(
      // heldMs: from the batch's first message in hand to its write's start (the hold, then the write ahead of it).
      { items: pending.items.length, rows: pending.rows, heldMs: started - pending.firstAt, ms: Date.now() - started, totals: this.stats },
      'batch written and committed',
    );
  }

  private async sendDeadLetters(pending: Pending<R>): Promise<void> {
    const poison = pending.items.filter((i) => i.poison && !i.done);
    if (poison.length === 0) return;
    const topic = this.opts.topics.events;
    await this.opts.producer.send({
      topic: this.opts.topics.deadLetter,
      acks: -1,
      messages: poison.map((i) =>
        deadLetter(i.poison!.letter, { topic, partition: i.partition, offset: i.offset, index: i.index }, i.poison!.error),
      ),
    });
    for (const i of poison) {
      i.done = true;
      this.log.warn({ partition: i.partition, offset: i.offset, index: i.index, error: i.poison!.error }, 'poison message dead-lettered');
    }
    this.stats.deadLettered += poison.length;
  }

  /** Inserts the rows not yet stored, in inserts of at most maxRows rows and 50 partitions; returns how many it inserted. */
  private async insert(pending: Pending<R>): Promise<number> {
    let todo = pending.items.filter((i) => i.row && !i.done);
    if (todo.length === 0) return 0;
    todo = await this.ownership.unstored(todo);
    let inserted = 0;
    let current: Item<R>[] = [];
    try {
      for (const chunk of chunks(todo, this.maxRows, this.target.partitionKey)) {
        current = chunk;
        const started = performance.now();
        await this.target.insert(
          this.opts.ch,
          mapLarge(chunk, (i) => i.row!),
        );
        this.opts.onInsert?.(this.target.name, chunk.length, (performance.now() - started) / 1000);
        for (const i of chunk) i.done = true;
        this.ownership.inserted(chunk);
        inserted += chunk.length;
        this.stats.inserts++;
        this.stats.rows += chunk.length;
        this.stats.largestInsert = Math.max(this.stats.largestInsert, chunk.length);
      }
    } catch (err) {
      // A failed insert may still have stored some or all of its rows (a timeout after the server
      // wrote them, a crash between parts).
      this.ownership.failed(todo);
      // …and its views may have missed what it stored.
      this.repairs.note(current);
      throw err;
    }
    return inserted;
  }

  /** Best effort: the next batch moves it on anyway. */
  private async afterWrite(pending: Pending<R>): Promise<void> {
    if (!this.target.afterWrite) return;
    try {
      const rows: R[] = [];
      for (const i of pending.items) if (i.row) rows.push(i.row);
      await this.target.afterWrite(rows);
    } catch (err) {
      this.log.warn({ err }, 'after-write step failed');
    }
  }

  /** Runs `fn` until it succeeds, backing off and heartbeating in between; gives up when the consumer stops. */
  private async retrying<T>(ctl: Control, what: string, fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await fn();
        if (attempt > 1) this.log.info({ what, attempts: attempt }, 'sink resumed');
        return result;
      } catch (err) {
        if (err instanceof Abandoned) throw err;
        if (!ctl.isRunning()) throw this.giveUp(`${what} failed while stopping`);
        const delay = Math.min(this.retry.maxMs, this.retry.initialMs * 2 ** (attempt - 1));
        this.log.warn({ what, attempt, retryInMs: delay, err }, 'sink paused: retrying without committing');
        const until = Date.now() + delay;
        while (Date.now() < until) {
          await sleep(Math.min(until - Date.now(), 1000));
          if (!ctl.isRunning()) throw this.giveUp(`${what} failed while stopping`);
          await this.beat(ctl);
        }
      }
    }
  }

  /** A failed heartbeat means a rebalance (or a lost session): drop what is held, let kafkajs rejoin. */
  private async beat(ctl: Control): Promise<void> {
    try {
      await ctl.heartbeat();
    } catch (err) {
      this.dropUncommitted('heartbeat failed');
      throw new Abandoned(err);
    }
  }

  private giveUp(reason: string): Abandoned {
    this.dropUncommitted(reason);
    return new Abandoned();
  }

  /**
   * Forgets everything not committed and rewinds the consumer to the first uncommitted offset of
   * each partition, so kafkajs refetches it even when it does not rejoin. Stored positions are
   * looked up again before the next insert; a write already under way may still finish.
   */
  private dropUncommitted(reason: string, rewind = true): void {
    const from = new Map<number, bigint>();
    let dropped = 0;
    for (const pending of this.uncommitted) {
      dropped += pending.items.length;
      for (const [partition, offset] of pending.from) {
        const at = from.get(partition);
        if (at === undefined || BigInt(offset) < at) from.set(partition, BigInt(offset));
      }
    }
    this.uncommitted.clear();
    this.epoch++;
    this.stopTimer();
    this.current = new Pending(this.epoch);
    this.ownership.reset();
    for (const [partition, offset] of rewind ? from : []) {
      try {
        this.consumer?.seek({ topic: this.opts.topics.events, partition, offset: offset.toString() });
      } catch {
        // not running any more: the next start reads from the committed offsets anyway
      }
    }
    if (dropped > 0) this.log.info({ reason, dropped }, 'dropped uncommitted events; they are refetched');
  }
}
