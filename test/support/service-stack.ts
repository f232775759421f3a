import { randomUUID } from 'node:crypto';
import type { Config } from '../../lib/config.js';
import { derivedTopicNames } from '../../lib/topology.js';
import { createLogger, type Logger } from '../../lib/logger.js';
import { runAlarmRules } from '../../pipeline/alarms/alarm-rules.js';
import { runProcessors } from '../../pipeline/processors/run.js';
import { runEventsSink } from '../../pipeline/sink/events-sink.js';
import { startApi, testConfig, type RunningApi } from './env.js';

/**
 * The service's back end on loopback, on a topic prefix of its own: a real api, the events sink,
 * the stream processors and the alarm rules, with short batching and timer periods. `stops` runs
 * in reverse at `close`; a caller adds what it starts on top (an edge, a front door, a browser).
 */
export interface ServiceStack {
  cfg: Config;
  /** The prefix's overrides, for processes started beside it (an edge). */
  overrides: Partial<Record<keyof Config, string>>;
  api: RunningApi;
  log: Logger;
  stops: Array<() => Promise<void>>;
  close(): Promise<void>;
}

export async function startServiceStack(name: string): Promise<ServiceStack> {
  const prefix = `${testConfig().KAFKA_TOPIC_PREFIX}.${name}${randomUUID().slice(0, 6)}`;
  const overrides = { KAFKA_TOPIC_PREFIX: prefix };
  const cfg = testConfig(overrides);
  const log = createLogger(`${name}-test`, cfg.LOG_LEVEL);
  const api = await startApi(cfg);
  const { kafka, db, ch, producer, publisher, topics } = api.services;
  const stops: Array<() => Promise<void>> = [() => api.close()];
  const close = async () => {
    for (const stop of stops.reverse()) await stop().catch((err) => log.error({ err }, `${name} stack: stop failed`));
  };
  try {
    const sink = await runEventsSink(kafka, {
      groupId: `${prefix}.sink.events`,
      partitions: cfg.KAFKA_PARTITIONS,
      ch,
      db,
      producer,
      topics,
      log,
      batchRows: 5000,
      batchMs: 200,
      drainMs: 5000,
    });
    stops.push(() => sink.stop());
    const processors = await runProcessors({
      kafka,
      db,
      ch,
      producer,
      log,
      prefix,
      partitions: cfg.KAFKA_PARTITIONS,
      events: topics.events,
      deadLetter: topics.deadLetter,
      derived: derivedTopicNames(prefix),
      batchRows: 5000,
      batchMs: 100,
      drainMs: 5000,
      tickMs: 300,
    });
    stops.push(() => processors.stop());
    const rules = await runAlarmRules({ kafka, db, log, publisher, prefix, tickMs: 300, commitIntervalMs: 0 });
    stops.push(() => rules.stop());
    return { cfg, overrides, api, log, stops, close };
  } catch (err) {
    await close();
    throw err;
  }
}
