import type { Kafka, Producer } from 'kafkajs';
import type { Ch } from '../../clickhouse/client.js';
import type { DerivedTopics } from '../../lib/events.js';
import { createMissingTopics } from '../../lib/kafka.js';
import type { Logger } from '../../lib/logger.js';
import type { Queryable } from '../../postgres/client.js';
import { healthTarget, occupancyTarget } from '../sink/derived.js';
import { runSink, type RunningSink } from '../sink/sink.js';
import { createOccupancyProcessor, type UnreflectedReason } from './occupancy.js';
import { LogThrottle } from '../../lib/log-throttle.js';
import { ProcessorRuntime, type Processor } from './runtime.js';
import { createHealthProcessor } from './health.js';

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
  only?: Array<'occupancy' | 'health'>;
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

/** Creates the derived topics when missing (partitioned like the events topic). */
export async function ensureDerivedTopics(kafka: Kafka, topics: DerivedTopics, partitions: number): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await createMissingTopics(admin, Object.values(topics).map((topic) => ({ topic, numPartitions: partitions })));
  } finally {
    await admin.disconnect();
  }
}

/** Runs the stream processors and the sinks of their outputs (docs/processors.md). */
export async function runProcessors(opts: ProcessorSetOptions): Promise<RunningProcessors> {
  const only = new Set(opts.only ?? ['occupancy', 'health']);
  await ensureDerivedTopics(opts.kafka, opts.derived, opts.partitions);
  const sinkOpts = (name: string, topic: string) => ({
    groupId: `${opts.prefix}.sink.${name}`,
    partitions: opts.partitions,
    ch: opts.ch,
    db: opts.db,
    producer: opts.producer,
    topics: { events: topic, deadLetter: opts.deadLetter },
    log: opts.log,
    batchRows: opts.batchRows,
    batchMs: opts.outputBatchMs ?? opts.batchMs,
    drainMs: opts.drainMs,
    onInsert: opts.onInsert,
  });
  const sinks: RunningSink[] = [];
  const runtimes: Array<ProcessorRuntime<unknown>> = [];
  const processors: Array<Processor<unknown>> = [];
  if (only.has('occupancy')) {
    sinks.push((await runSink(opts.kafka, occupancyTarget, sinkOpts('occupancy', opts.derived.occupancy))) as unknown as RunningSink);
    const lines = new LogThrottle(60_000);
    const unreflected = (venueId: string, reason: UnreflectedReason, count: number) => {
      opts.onUnreflected?.(venueId, reason, count);
      const since = lines.add(`${venueId}|${reason}`, count);
      if (since !== undefined) opts.log.info({ venueId, reason, events: since }, 'occupancy: events not reflected in live occupancy (they stay in the raw table and the history; at most one line a minute per venue and reason)');
    };
    processors.push(createOccupancyProcessor({ db: opts.db, inputTopic: opts.events, outputTopic: opts.derived.occupancy, unreflected }) as Processor<unknown>);
  }
  if (only.has('health')) {
    sinks.push((await runSink(opts.kafka, healthTarget, sinkOpts('health', opts.derived.connectorHealth))) as unknown as RunningSink);
    processors.push(createHealthProcessor({ db: opts.db, reportsTopic: opts.derived.ingestReports, outputTopic: opts.derived.connectorHealth }) as Processor<unknown>);
  }
  for (const p of processors) {
    const rt = new ProcessorRuntime(p, { kafka: opts.kafka, log: opts.log, prefix: opts.prefix, partitions: opts.partitions, tickMs: opts.tickMs });
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
