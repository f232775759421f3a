import { decodeEventsOfTypes } from '../../lib/events/wire.js';
import { type TopicEvent } from '../../lib/events/canonical.js';
import { type EventType } from '../../lib/events/vocabulary.js';
import type { Logger } from '../../lib/logger.js';

/** What a stream processor is to the runtime (docs/processors.md): the contract occupancy and health implement. */

export interface InputMessage {
  topic: string;
  partition: number;
  offset: string;
  value: Buffer | null;
  headers?: Record<string, unknown>;
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

/**
 * The events of `types` in a batch of events-topic messages, in order. What cannot be read is
 * skipped with a log line: the events sink dead-letters it, and nothing here could count it.
 */
export function eventsOfTypes(
  messages: InputMessage[],
  types: ReadonlySet<EventType>,
  ctx: ProcessorContext,
  processor: string,
): TopicEvent[] {
  const events: TopicEvent[] = [];
  for (const m of messages) {
    try {
      const got = decodeEventsOfTypes(m, types);
      for (const e of got.events) events.push(e);
      if (got.invalid > 0)
        ctx.log.warn(
          { partition: m.partition, offset: m.offset, invalid: got.invalid },
          `${processor}: events not in the contract skipped`,
        );
    } catch (err) {
      ctx.log.warn({ partition: m.partition, offset: m.offset, err }, `${processor}: undecodable message skipped`);
    }
  }
  return events;
}
