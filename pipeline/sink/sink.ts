import type { Batch, Consumer, EachBatchPayload, Kafka, Producer } from 'kafkajs';
import type { Ch } from '../../clickhouse/client.js';
import type { StoredOffsetsQuery } from '../../clickhouse/queries/events.js';
import type { Logger } from '../../lib/logger.js';
import type { Queryable } from '../../postgres/client.js';
import { deadLetter, describeError, type Letter } from './dead-letter.js';
import type { Origin } from './rows.js';
import { VenueContexts, type VenueContext } from './venue-context.js';
import { runConsumer, type RunningConsumer } from '../../lib/consumer.js';

/**
 * A sink: one Kafka topic → one ClickHouse table (and, through its materialized views, the tables
 * derived from it), in large batches, with an exactly-once effect. The events sink (raw events)
 * and the processors' output sinks are instances of it, each with its own `SinkTarget`. See
 * docs/pipeline.md.
 *
 * Batching. kafkajs calls eachBatch once per partition per fetch, and fetches again only after
 * every batch of the previous fetch returned. Batches are accumulated in memory across partitions
 * and fetches: each call adds its messages to the pending batch and resolves their offsets (so the
 * next fetch moves on; with autoCommit off kafkajs never commits by itself), and returns at once
 * while the partition has more to read. The pending batch is written when it holds `batchRows`
 * rows or is `batchMs` old; a call whose partition is caught up waits for that deadline itself, so
 * the tail of a burst is written too. Every write happens inside an eachBatch call, and kafkajs
 * rejoins the group after a rebalance only once those calls returned: a write never overlaps a
 * new owner's writes of the same partition. The run uses as many concurrent partitions as the
 * topic has, so all batches of one fetch share one write.
 *
 * Exactly-once effect. Offsets are committed only after the rows are in ClickHouse. Rows carry
 * their Kafka topic/partition/offset; after a (re)assignment or a failed write, the positions of
 * the rows about to be written are looked up in the raw table first and stored ones are skipped,
 * so a replay never stores a message twice. Writes are serialized. Events whose id is derived
 * from a vendor event id (re-deliveries) are also dropped when that id is already stored.
 *
 * Pausing. While ClickHouse (or Postgres, or the dead-letter topic) is unavailable the write is
 * retried with backoff inside the call that owns it, heartbeating in between: kafkajs fetches
 * nothing meanwhile (the consumer is paused in effect), keeps its group membership, and the sink
 * resumes by itself when the write succeeds. Nothing is committed until then.
 *
 * Poison messages (undecodable, schema-invalid, unknown venue, venue of another operator) go to
 * the dead-letter topic with the reason and their origin in headers, then are committed past.
 */

/** What every sunk row carries: its venue, event time (seconds + ms) and retention class. */
export interface SinkRow {
  venue_id: string;
  ts: number;
  ts_ms: number;
  retention_days: number;
}

/** A message element the target could decode: the venue and operator it claims, and its row once the venue is known. */
export interface Decoded<R> {
  /** The element as sent (dead-lettered alone if its venue refuses it). */
  raw: unknown;
  venueId: string;
  operatorId: string;
  toRow(origin: Origin, ctx: VenueContext): R;
}

/** An element that is not of the topic's type: dead-lettered on its own (`raw` as sent), the others of its message stored. */
export interface Undecodable {
  error: string;
  raw: unknown;
}

/** What differs between sinks: the message type, the table, and optional extras. */
export interface SinkTarget<R extends SinkRow> {
  /** For logs. */
  name: string;
  /** The message's elements in order (an events message holds a run of a request's events); throws when the whole message is unreadable (it is dead-lettered). */
  decode(value: Buffer | null): Array<Decoded<R> | Undecodable>;
  insert(ch: Ch, rows: R[]): Promise<void>;
  /** The positions already stored (`partition:offset:index`). */
  storedOffsets(ch: Ch, q: StoredOffsetsQuery): Promise<Set<string>>;
  /** The table's partition of a row (an insert touches at most 50). */
  partitionKey(row: R): string;
  /** Rows that re-deliver an already stored (or earlier) one; they are skipped. */
  redeliveries?(ch: Ch, rows: R[]): Promise<Set<R>>;
  /** After a successful insert, best effort. */
  afterWrite?(rows: R[]): Promise<void>;
}

export interface SinkOptions {
  ch: Ch;
  db: Queryable;
  /** Sends dead letters (acks from all in-sync replicas). */
  producer: Producer;
  /** `events` is the topic consumed (for an output sink, its output topic); `deadLetter` receives poison messages. */
  topics: { events: string; deadLetter: string };
  log: Logger;
  batchRows: number;
  batchMs: number;
  retry?: { initialMs: number; maxMs: number };
  /** Fault injection for tests: runs after rows reached ClickHouse and before their offsets are committed. */
  afterInsert?: (rows: number) => Promise<void>;
  /** Observes every successful insert (metrics): the target's name, rows, seconds taken. */
  onInsert?: (target: string, rows: number, seconds: number) => void;
}

/** What the sink has done so far (for logs and tests). */
export interface SinkStats {
  inserts: number;
  rows: number;
  largestInsert: number;
  deadLettered: number;
  /** Rows found already stored (a replayed Kafka position) and skipped. */
  skipped: number;
  /** Re-delivered events (an event id already stored or earlier in the batch) dropped. */
  duplicates: number;
  commits: number;
}

/**
 * An INSERT of fewer rows than max_insert_block_size (1,048,576 by default on every version) is
 * one block. A block spanning many partitions is written as one part per partition, and current
 * ClickHouse refuses more than 100 partitions per block (each view's target counts too; the daily
 * rollup's local days can double the raw table's days), hence at most 50 raw partitions per insert.
 */
const MAX_INSERT_ROWS = 1_000_000;
const MAX_PARTITIONS_PER_INSERT = 50;

interface Item<R> {
  partition: number;
  offset: string;
  /** Place in its message. */
  index: number;
  row?: R;
  poison?: { letter: Letter; error: string };
  /** Inserted, found stored, or dead-lettered: a retry leaves it alone. */
  done: boolean;
}

class Pending<R> {
  readonly items: Item<R>[] = [];
  rows = 0;
  firstAt = 0;
  /** Per partition: the offset to commit once written, and the first offset held (where a rewind restarts). */
  readonly commit = new Map<number, string>();
  readonly from = new Map<number, string>();
  written?: Promise<void>;
  constructor(readonly epoch: number) {}
}

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
  readonly stats: SinkStats = { inserts: 0, rows: 0, largestInsert: 0, deadLettered: 0, skipped: 0, duplicates: 0, commits: 0 };
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
  /** Partitions whose stored positions are known: nobody but this sink wrote them since it last checked. */
  private readonly verified = new Set<number>();
  private active = 0;
  private draining = false;
  /** After this instant retries give up (set by drain). */
  private giveUpAt = Infinity;
  private wake!: () => void;
  private readonly woken = new Promise<void>((resolve) => (this.wake = resolve));

  constructor(
    private readonly opts: SinkOptions,
    private readonly target: SinkTarget<R>,
  ) {
    this.contexts = new VenueContexts(opts.db);
    this.log = opts.log.child({ component: 'sink', table: target.name });
    this.maxRows = Math.min(opts.batchRows, MAX_INSERT_ROWS);
    this.retry = opts.retry ?? { initialMs: 250, maxMs: 10_000 };
  }

  /** Wires the sink to its consumer before the consumer runs: group joins and rewinds. */
  attach(consumer: Consumer): void {
    this.consumer = consumer;
    // kafkajs restarts from the committed offsets after every join (no rewind needed); what was
    // held is refetched, and another member may have written our former partitions meanwhile.
    consumer.on(consumer.events.GROUP_JOIN, () => this.dropUncommitted('group joined', false));
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
      const items = await this.retrying(ctl, 'look up venues', () => this.decode(batch));
      // A rewind (seek) while this call was decoding makes the batch stale: kafkajs refetches it.
      if (payload.isStale()) return;
      const pending = this.current;
      this.hold(pending, batch, items);
      payload.resolveOffset(batch.lastOffset());
      if (!this.due(pending) && batch.offsetLag() === '0') await this.waitUntilDue(pending, ctl);
      if (this.due(pending) || pending.written) await this.flush(pending, ctl);
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
    this.wake();
    const consumer = this.consumer;
    try {
      consumer?.pause([{ topic: this.opts.topics.events }]);
    } catch {
      // the consumer already stopped: nothing more is fetched anyway
    }
    while (this.active > 0) await sleep(10);
    const pending = this.current;
    if (!consumer || pending.items.length === 0) return;
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

  private async decode(batch: Batch): Promise<Item<R>[]> {
    const what = this.target.name === 'events' ? 'event' : `${this.target.name} message`;
    const decoded = batch.messages.map((message) => {
      try {
        return { message, parts: this.target.decode(message.value) };
      } catch (err) {
        return { message, error: `undecodable ${what}: ${describeError(err)}` };
      }
    });
    const venueIds: string[] = [];
    for (const d of decoded) for (const p of d.parts ?? []) if ('venueId' in p) venueIds.push(p.venueId);
    const contexts = await this.contexts.resolve(venueIds);
    const items: Item<R>[] = [];
    for (const { message, parts, error } of decoded) {
      const at = { partition: batch.partition, offset: message.offset, done: false };
      if (!parts) {
        items.push({ ...at, index: 0, poison: { letter: message, error: error! } });
        continue;
      }
      for (let index = 0; index < parts.length; index++) {
        const part = parts[index]!;
        const item: Item<R> = { partition: batch.partition, offset: message.offset, done: false, index };
        let reason: string | undefined;
        if ('error' in part) reason = `undecodable ${what}: ${part.error}`;
        else {
          const ctx = contexts.get(part.venueId);
          if (!ctx) reason = `unknown venue ${part.venueId}`;
          else if (ctx.operatorId !== part.operatorId) reason = `venue ${part.venueId} belongs to another operator`;
          else {
            try {
              item.row = part.toRow({ topic: batch.topic, partition: batch.partition, offset: message.offset, index }, ctx);
            } catch (err) {
              // e.g. a time zone the runtime does not know
              reason = describeError(err);
            }
          }
        }
        if (reason !== undefined) {
          // An element of a message holding several is dead-lettered alone: a replay must not repeat the others.
          const value = parts.length === 1 ? message.value : Buffer.from(JSON.stringify(part.raw));
          item.poison = { letter: { key: message.key, value, headers: message.headers }, error: reason };
        }
        items.push(item);
      }
    }
    return items;
  }

  private hold(pending: Pending<R>, batch: Batch, items: Item<R>[]): void {
    if (pending.items.length === 0) pending.firstAt = Date.now();
    this.uncommitted.add(pending);
    for (const item of items) {
      pending.items.push(item);
      if (item.row) pending.rows++;
    }
    if (!pending.from.has(batch.partition)) pending.from.set(batch.partition, batch.firstOffset()!);
    pending.commit.set(batch.partition, (BigInt(batch.lastOffset()) + 1n).toString());
  }

  private due(pending: Pending<R>): boolean {
    return this.draining || pending.rows >= this.maxRows || Date.now() - pending.firstAt >= this.opts.batchMs;
  }

  /** Waits (heartbeating) until the pending batch is due or someone else started writing it. */
  private async waitUntilDue(pending: Pending<R>, ctl: Control): Promise<void> {
    while (!this.due(pending) && !pending.written) {
      const left = pending.firstAt + this.opts.batchMs - Date.now();
      await Promise.race([sleep(Math.min(Math.max(left, 1), 1000)), this.woken]);
      await this.beat(ctl);
    }
  }

  /** Detaches `pending` (if current) and queues its write; every caller holding it awaits the same write. */
  private flush(pending: Pending<R>, ctl: Control): Promise<void> {
    if (pending === this.current) this.current = new Pending(this.epoch);
    pending.written ??= this.chain = this.chain.catch(() => undefined).then(() => this.write(pending, ctl));
    return pending.written;
  }

  private async write(pending: Pending<R>, ctl: Control): Promise<void> {
    // Dropped while queued: kafkajs refetches these messages.
    if (pending.epoch !== this.epoch) throw new Abandoned();
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
    if (pending.epoch === this.epoch) for (const p of pending.commit.keys()) this.verified.add(p);
    this.log.debug({ items: pending.items.length, rows: pending.rows, ms: Date.now() - started, totals: this.stats }, 'batch written and committed');
  }

  private async sendDeadLetters(pending: Pending<R>): Promise<void> {
    const poison = pending.items.filter((i) => i.poison && !i.done);
    if (poison.length === 0) return;
    const topic = this.opts.topics.events;
    await this.opts.producer.send({
      topic: this.opts.topics.deadLetter,
      acks: -1,
      messages: poison.map((i) => deadLetter(i.poison!.letter, { topic, partition: i.partition, offset: i.offset, index: i.index }, i.poison!.error)),
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
    const unverified = todo.filter((i) => !this.verified.has(i.partition));
    if (unverified.length > 0) {
      const stored = await this.target.storedOffsets(this.opts.ch, {
        topic: this.opts.topics.events,
        partitions: [...new Set(unverified.map((i) => i.partition))],
        fromOffset: unverified.reduce((m, i) => (BigInt(i.offset) < m ? BigInt(i.offset) : m), BigInt(unverified[0]!.offset)),
        toOffset: unverified.reduce((m, i) => (BigInt(i.offset) > m ? BigInt(i.offset) : m), 0n),
        ...tsBounds(unverified),
      });
      for (const i of unverified) {
        if (stored.has(`${i.partition}:${i.offset}:${i.index}`)) {
          i.done = true;
          this.stats.skipped++;
        }
      }
      todo = todo.filter((i) => !i.done);
    }
    todo = await this.withoutRedeliveries(todo);
    let inserted = 0;
    try {
      for (const chunk of chunks(todo, this.maxRows, this.target.partitionKey)) {
        const started = performance.now();
        await this.target.insert(this.opts.ch, chunk.map((i) => i.row!));
        this.opts.onInsert?.(this.target.name, chunk.length, (performance.now() - started) / 1000);
        for (const i of chunk) i.done = true;
        inserted += chunk.length;
        this.stats.inserts++;
        this.stats.rows += chunk.length;
        this.stats.largestInsert = Math.max(this.stats.largestInsert, chunk.length);
      }
    } catch (err) {
      // A failed insert may still have stored some or all of its rows (a timeout after the server
      // wrote them, a crash between parts): look before the next attempt.
      for (const i of todo) this.verified.delete(i.partition);
      throw err;
    }
    return inserted;
  }

  /** Drops re-deliveries the target recognises (vendor event ids already stored or earlier in the batch). */
  private async withoutRedeliveries(todo: Item<R>[]): Promise<Item<R>[]> {
    if (!this.target.redeliveries || todo.length === 0) return todo;
    const again = await this.target.redeliveries(this.opts.ch, todo.map((i) => i.row!));
    if (again.size === 0) return todo;
    for (const i of todo) {
      if (again.has(i.row!)) {
        i.done = true;
        this.stats.duplicates++;
      }
    }
    return todo.filter((i) => !i.done);
  }

  /** Best effort: the next batch moves it on anyway. */
  private async afterWrite(pending: Pending<R>): Promise<void> {
    if (!this.target.afterWrite) return;
    try {
      await this.target.afterWrite(pending.items.flatMap((i) => (i.row ? [i.row] : [])));
    } catch (err) {
      this.log.warn({ err: describeError(err) }, 'after-write step failed');
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
        this.log.warn({ what, attempt, retryInMs: delay, err: describeError(err) }, 'sink paused: retrying without committing');
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
    this.current = new Pending(this.epoch);
    this.verified.clear();
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

export interface RunningSink<R extends SinkRow = SinkRow> {
  sink: Sink<R>;
  consumer: RunningConsumer;
  /** Stops fetching, writes and commits what is held (within `drainMs`), then leaves the group. */
  stop(): Promise<void>;
}

/** Runs a sink as one member of `groupId`, over as many concurrent partitions as the topic has. */
export async function runSink<R extends SinkRow>(
  kafka: Kafka,
  target: SinkTarget<R>,
  opts: SinkOptions & { groupId: string; partitions: number; drainMs: number },
): Promise<RunningSink<R>> {
  const sink = new Sink<R>(opts, target);
  const consumer = await runConsumer(kafka, opts.log, {
    groupId: opts.groupId,
    topic: opts.topics.events,
    eachBatch: sink.eachBatch,
    partitionsConsumedConcurrently: opts.partitions,
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

/** The event-time bounds (epoch seconds) of the items' rows: a replayed row keeps its event time, so they prune lookups. */
function tsBounds<R extends SinkRow>(items: Item<R>[]): { fromTs: number; toTs: number } {
  let fromTs = Infinity;
  let toTs = 0;
  for (const i of items) {
    fromTs = Math.min(fromTs, i.row!.ts);
    toTs = Math.max(toTs, i.row!.ts);
  }
  return { fromTs, toTs };
}

/** Consecutive runs of at most `maxRows` items touching at most MAX_PARTITIONS_PER_INSERT raw partitions. */
function chunks<R extends SinkRow>(items: Item<R>[], maxRows: number, partitionKey: (row: R) => string): Item<R>[][] {
  const out: Item<R>[][] = [];
  let chunk: Item<R>[] = [];
  let keys = new Set<string>();
  for (const item of items) {
    const key = partitionKey(item.row!);
    if (chunk.length >= maxRows || (!keys.has(key) && keys.size >= MAX_PARTITIONS_PER_INSERT)) {
      out.push(chunk);
      chunk = [];
      keys = new Set();
    }
    chunk.push(item);
    keys.add(key);
  }
  if (chunk.length > 0) out.push(chunk);
  return out;
}
