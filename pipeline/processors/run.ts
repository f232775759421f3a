import type { Kafka, Producer } from 'kafkajs';
import type { Ch } from '../../clickhouse/client.js';
import type { DerivedTopics, StatefulProcessor } from '../../lib/topology.js';
import { LogThrottle } from '../../lib/log-throttle.js';
import type { Logger } from '../../lib/logger.js';
import type { Queryable } from '../../postgres/client.js';
import { healthTarget, occupancyTarget } from '../sink/derived.js';
import { runSink, type RunningSink } from '../sink/run.js';
import type { SinkRow, SinkTarget } from '../sink/sink.js';
import { createHealthProcessor } from './health.js';
import { createOccupancyProcessor, type UnreflectedReason } from './occupancy.js';
import type { Processor } from './processor.js';
import { ProcessorRuntime } from './runtime.js';
import { VenueInfos, type VenueLookup } from './venues.js';

export interface ProcessorSetOptions {
  kafka: Kafka;
  db: Queryable;
  ch: Ch;
  /** Sends the output sinks' dead letters. */
  producer: Producer;
  log: Logger;
  /** Topic prefix of groups and changelogs. */
  prefix: string;
  partitions: number;
  events: string;
  deadLetter: string;
  derived: DerivedTopics;
  batchRows: number;
  batchMs: number;
  /** The output sinks' batchMs; batchMs when absent. */
  outputBatchMs?: number;
  drainMs: number;
  tickMs?: number;
  /** Processors to run (default all). */
  only?: ProcessorName[];
  /** Observes every insert of the output sinks (metrics). */
  onInsert?: (target: string, rows: number, seconds: number) => void;
  /** Counts events live occupancy does not reflect, per venue and reason (metrics). */
  onUnreflected?: (venueId: string, reason: UnreflectedReason, count: number) => void;
}

export interface RunningProcessors {
  runtimes: Array<ProcessorRuntime<unknown>>;
  sinks: RunningSink[];
  /** Processors first (nothing new is produced), then the sinks write and commit what they hold. */
  stop(): Promise<void>;
}

/** What a registration's factory gets: its topics, the venue look-up, and the set's options. */
interface ProcessorDeps {
  input: string;
  output: string;
  venues: VenueLookup;
  opts: ProcessorSetOptions;
}

/** A stream processor and the sink writing its output topic to ClickHouse. */
interface Registration {
  /**
   * What `only` selects; also names its sink's consumer group (`<prefix>.sink.<name>`). One of
   * lib/topology.ts's STATEFUL_PROCESSORS, which gives the processor its changelog topic.
   */
  name: StatefulProcessor;
  input(opts: ProcessorSetOptions): string;
  output(opts: ProcessorSetOptions): string;
  target: SinkTarget<SinkRow>;
  create(deps: ProcessorDeps): Processor<unknown>;
}

/** The processors, in start order: adding one is one entry. */
const PROCESSORS = [
  {
    name: 'occupancy',
    input: (o) => o.events,
    output: (o) => o.derived.occupancy,
    target: occupancyTarget,
    create: ({ input, output, venues, opts }) =>
      createOccupancyProcessor({ venues, inputTopic: input, outputTopic: output, unreflected: unreflectedReporter(opts) }),
  },
  {
    name: 'health',
    input: (o) => o.derived.ingestReports,
    output: (o) => o.derived.connectorHealth,
    target: healthTarget,
    create: ({ input, output, venues }) => createHealthProcessor({ venues, reportsTopic: input, outputTopic: output }),
  },
] as const satisfies readonly Registration[];

export type ProcessorName = (typeof PROCESSORS)[number]['name'];

/** Counts what live occupancy does not reflect, and logs it at most once a minute per venue and reason. */
function unreflectedReporter(opts: ProcessorSetOptions): (venueId: string, reason: UnreflectedReason, count: number) => void {
  const lines = new LogThrottle(60_000);
  return (venueId, reason, count) => {
    opts.onUnreflected?.(venueId, reason, count);
    const since = lines.add(`${venueId}|${reason}`, count);
    if (since !== undefined)
      opts.log.info(
        { venueId, reason, events: since },
        'occupancy: events not reflected in live occupancy (they stay in the raw table and the history; at most one line a minute per venue and reason)',
      );
  };
}

/** Runs the stream processors and the sinks of their outputs (docs/processors.md). */
export async function runProcessors(opts: ProcessorSetOptions): Promise<RunningProcessors> {
  const only = new Set<string>(opts.only ?? PROCESSORS.map((p) => p.name));
  const sinks: RunningSink[] = [];
  const processors: Array<Processor<unknown>> = [];
  const registered: readonly Registration[] = PROCESSORS;
  for (const r of registered) {
    if (!only.has(r.name)) continue;
    const output = r.output(opts);
    sinks.push(
      await runSink(opts.kafka, r.target, {
        groupId: `${opts.prefix}.sink.${r.name}`,
        partitions: opts.partitions,
        ch: opts.ch,
        db: opts.db,
        producer: opts.producer,
        topics: { events: output, deadLetter: opts.deadLetter },
        log: opts.log,
        batchRows: opts.batchRows,
        batchMs: opts.outputBatchMs ?? opts.batchMs,
        drainMs: opts.drainMs,
        onInsert: opts.onInsert,
        // A few commits a second, batched for seconds: a fetch when they arrive is soon enough, and idles cheaper than a poll.
        fetch: 'bulk',
      }),
    );
    // Each its own cache, so one processor's reloads do not change what the other sees when.
    processors.push(r.create({ input: r.input(opts), output, venues: new VenueInfos(opts.db), opts }));
  }
  const runtimes: Array<ProcessorRuntime<unknown>> = [];
  for (const p of processors) {
    const rt = new ProcessorRuntime(p, {
      kafka: opts.kafka,
      log: opts.log,
      prefix: opts.prefix,
      partitions: opts.partitions,
      tickMs: opts.tickMs,
    });
    await rt.start();
    runtimes.push(rt);
  }
  return {
    runtimes,
    sinks,
    async stop() {
      for (const rt of runtimes) await rt.stop();
      for (const s of sinks) await s.stop();
    },
  };
}
