import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { clearOrphanedAlarms, evaluateConnectorHealth, evaluateOccupancy, raiseDueAlarms } from '../../domain/alarms/evaluate.js';
import { publishAlarmEvents, relayAlarmEvents, type AlarmEventBus } from '../../domain/alarms/events.js';
import { DEFAULT_OCCUPANCY_RULE, type OccupancyRule } from '../../domain/alarms/rules.js';
import { alarmTopicName, derivedTopicNames } from '../../lib/topology.js';
import { decodeConnectorHealthChange, decodeOccupancyUpdate } from '../../lib/events/derived.js';
import { consumerOptions, subscribeWhenKnown, type Publisher } from '../../lib/kafka.js';
import type { Logger } from '../../lib/logger.js';
import { every } from '../../lib/timers.js';
import type { Db } from '../../postgres/client.js';

/**
 * The alarm-rule consumer (docs/alarms.md): one Kafka consumer group over the occupancy-update and
 * connector-health topics, both keyed by venue, so a venue's inputs are evaluated in order by one
 * member. The rules' state lives in Postgres (domain/alarms/evaluate.ts), written before offsets
 * are committed; after a crash the uncommitted inputs are read again and skipped by their offset.
 * A timer raises breaches whose minimum duration has passed, clears the alarms of deleted zones,
 * integrations and venues, and relays alarm events left in the outbox (by a crash, or while Kafka
 * was away, here or in the api).
 */

export interface AlarmRulesOptions {
  kafka: Kafka;
  db: Db;
  log: Logger;
  /** Publishes alarm events (acks from all replicas). */
  publisher: Publisher;
  /** Topic prefix: inputs and the alarms topic are named from it (lib/topology.ts, which creates them). */
  prefix: string;
  groupId?: string;
  occupancyRule?: OccupancyRule;
  /** Offsets are committed at most this often (and on stop); Postgres, not the offset, is the truth. */
  commitIntervalMs?: number;
  /** Period of the due-breach and outbox timer. */
  tickMs?: number;
  /** Outbox rows older than this are relayed (younger ones are being published by their writer). */
  relayAfterMs?: number;
  sessionTimeoutMs?: number;
}

export interface RunningAlarmRules {
  groupId: string;
  stop(): Promise<void>;
}

/** SQLSTATE classes 22 (data exception) and 23 (integrity constraint violation): the same input fails every time. */
const isDataError = (err: unknown): boolean => /^2[23]/.test(String((err as { code?: unknown })?.code ?? ''));

export async function runAlarmRules(opts: AlarmRulesOptions): Promise<RunningAlarmRules> {
  const derived = derivedTopicNames(opts.prefix);
  const inputs = { occupancy: derived.occupancy, health: derived.connectorHealth };
  const groupId = opts.groupId ?? `${opts.prefix}.alarms.rules`;
  const rule = opts.occupancyRule ?? DEFAULT_OCCUPANCY_RULE;
  const log = opts.log.child({ component: 'alarm-rules', group: groupId });
  const bus: AlarmEventBus = { publisher: opts.publisher, topic: alarmTopicName(opts.prefix), log };
  const commitIntervalMs = opts.commitIntervalMs ?? 1000;
  const relayAfterMs = opts.relayAfterMs ?? 10_000;

  const publish = async (ids: number[]) => {
    try {
      await publishAlarmEvents(opts.db, bus, ids, { hold: true });
    } catch (err) {
      log.warn({ err, events: ids.length }, 'alarm events not published yet; the outbox relay sends them later');
    }
  };

  const consumer: Consumer = opts.kafka.consumer(consumerOptions('member', { groupId, sessionTimeout: opts.sessionTimeoutMs }));
  let lastCommit = Date.now();
  let stopping = false;
  let inHand: Promise<void> = Promise.resolve();
  /** Next offset to read per topic and partition, not yet committed. */
  const uncommitted = new Map<string, { topic: string; partition: number; offset: string }>();
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const assignment = e.payload.memberAssignment as Record<string, number[]>;
    // A partition now read by another member must not have its committed offset moved back by us.
    for (const [key, o] of uncommitted) if (!assignment[o.topic]?.includes(o.partition)) uncommitted.delete(key);
    log.info({ assignment }, 'joined group');
  });
  consumer.on(consumer.events.CRASH, (e) => log.error({ err: e.payload.error, restart: e.payload.restart }, 'alarm-rule consumer crashed'));
  const commit = async () => {
    const offsets = [...uncommitted.values()];
    if (offsets.length === 0) return;
    uncommitted.clear();
    await consumer.commitOffsets(offsets);
    lastCommit = Date.now();
  };
  const eachBatch = (payload: EachBatchPayload): Promise<void> => (inHand = handleBatch(payload));
  const handleBatch = async (payload: EachBatchPayload): Promise<void> => {
    const { batch } = payload;
    const input = `${batch.topic}:${batch.partition}`;
    const ids: number[] = [];
    for (const m of batch.messages) {
      if (stopping || !payload.isRunning() || payload.isStale()) break;
      const at = { input, offset: Number(m.offset) };
      try {
        if (batch.topic === inputs.occupancy) {
          let update;
          try {
            update = decodeOccupancyUpdate(m.value);
          } catch (err) {
            log.warn({ input, offset: m.offset, err }, 'undecodable occupancy update skipped');
          }
          if (update) ids.push(...(await evaluateOccupancy(opts.db, rule, update, at)));
        } else {
          let change;
          try {
            change = decodeConnectorHealthChange(m.value);
          } catch (err) {
            log.warn({ input, offset: m.offset, err }, 'undecodable connector health change skipped');
          }
          if (change) ids.push(...(await evaluateConnectorHealth(opts.db, change, at)));
        }
      } catch (err) {
        if (isDataError(err)) {
          // This input can never be applied (Postgres refuses its data): retrying would block the partition.
          log.error({ input, offset: m.offset, err }, 'alarm rule input refused by Postgres; skipped');
        } else {
          // Postgres away or failing: keep what is done, read this input again in a second.
          log.warn({ input, offset: m.offset, err }, 'alarm rule evaluation failed; retrying the input');
          const resume = payload.pause();
          consumer.seek({ topic: batch.topic, partition: batch.partition, offset: m.offset });
          setTimeout(resume, 1000).unref();
          break;
        }
      }
      payload.resolveOffset(m.offset);
      uncommitted.set(input, { topic: batch.topic, partition: batch.partition, offset: (BigInt(m.offset) + 1n).toString() });
      try {
        await payload.heartbeat();
      } catch (err) {
        // A rebalance: the rest of the batch is another member's now (or ours again, read anew).
        log.info({ input, err }, 'batch left to the rebalance');
        break;
      }
    }
    // Events first: a commit waiting out a rebalance must not leave them to the relay.
    await publish(ids);
    if (Date.now() - lastCommit >= commitIntervalMs && !payload.isStale()) {
      await commit().catch((err: unknown) => log.warn({ err }, 'offset commit failed; the inputs are read again and skipped'));
    }
  };

  await consumer.connect();
  await subscribeWhenKnown(consumer, { topics: [inputs.occupancy, inputs.health], fromBeginning: true });
  await consumer.run({ autoCommit: false, eachBatchAutoResolve: false, partitionsConsumedConcurrently: 1, eachBatch });

  const tick = async () => {
    // Inputs applied by the last batch are committed here when no later batch came to do it.
    if (Date.now() - lastCommit >= commitIntervalMs) {
      await commit().catch((err: unknown) => log.warn({ err }, 'offset commit failed; the inputs are read again and skipped'));
    }
    try {
      await publish(await raiseDueAlarms(opts.db));
      await publish(await clearOrphanedAlarms(opts.db));
    } catch (err) {
      log.warn({ err }, 'raising due alarms or clearing those of deleted sources failed; retried at the next tick');
    }
    try {
      await relayAlarmEvents(opts.db, bus, relayAfterMs);
    } catch (err) {
      log.warn({ err }, 'outbox relay failed; retried at the next tick');
    }
  };
  // tick catches its own failures; onError only sees what escapes them.
  const ticker = every(opts.tickMs ?? 1000, tick, { onError: (err) => log.warn({ err }, 'alarm rules tick failed') });
  log.info({ inputs, alarms: bus.topic }, 'alarm rules running');

  return {
    groupId,
    async stop() {
      await ticker.stop();
      // The batch in hand ends after its current input; what was applied is committed before leaving.
      stopping = true;
      await inHand.catch(() => undefined);
      await commit().catch((err: unknown) => log.warn({ err }, 'final offset commit failed; the inputs are read again and skipped'));
      await consumer.stop();
      await consumer.disconnect();
      log.info('alarm rules stopped');
    },
  };
}
