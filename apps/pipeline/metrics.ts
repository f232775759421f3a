import type { Admin } from 'kafkajs';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Logger } from '../../lib/logger.js';
import type { HousekeepingAction } from '../../pipeline/housekeeping.js';
import type { DeriveStats } from '../../pipeline/derive/job.js';
import type { RunningPollers } from '../../pipeline/pollers/runner.js';
import type { SinkStats } from '../../pipeline/sink/target.js';
import { createRegistry, observedGauges } from '../../lib/metrics.js';
import { topicOffsets } from '../../lib/kafka.js';

/** The pipeline's Prometheus metrics (docs/metrics.md). */
export interface PipelineMetrics {
  registry: Registry;
  /** For the sinks' `onInsert`. */
  observeInsert(target: string, rows: number, seconds: number): void;
  /** For the housekeeping's `onPartition`: a partition dropped (retention) or compacted. */
  observeHousekeeping(action: HousekeepingAction, table: string): void;
  /** The derive job's progress, read at each scrape. */
  observeDerive(stats: DeriveStats): void;
  /** The vendor pollers of this process, read at each scrape. */
  observePollers(pollers: RunningPollers): void;
  /** The events sink's counts, read at each scrape. */
  observeEventsSink(stats: SinkStats): void;
  /** Events a live figure could not reflect, by venue and reason (docs/processors.md#what-is-not-reflected). */
  unreflected(venueId: string, reason: string, count: number): void;
}

/**
 * Insert rows and latency per sink target, and the lag of every consumer group of this deployment
 * (committed offset behind the partition's end), read from Kafka at each scrape: the lag of a
 * group whose members all died is still visible.
 */
export function createPipelineMetrics(admin: Admin, prefix: string, log: Logger): PipelineMetrics {
  const registry = createRegistry('pipeline');
  const rows = new Counter({
    name: 'clickhouse_insert_rows_total',
    help: 'Rows inserted into ClickHouse, by sink target',
    labelNames: ['target'],
    registers: [registry],
  });
  const inserts = new Histogram({
    name: 'clickhouse_insert_duration_seconds',
    help: 'Time of one ClickHouse insert, by sink target',
    labelNames: ['target'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const housekeeping = new Counter({
    name: 'clickhouse_housekeeping_partitions_total',
    help: 'Partitions dropped past their retention window or compacted into one part, by table',
    labelNames: ['action', 'table'],
    registers: [registry],
  });
  const unreflected = new Counter({
    name: 'venue_events_unreflected_total',
    help: 'Accepted events a live figure does not reflect (they stay in the raw table and the derived history), by venue and reason',
    labelNames: ['venue_id', 'reason'],
    registers: [registry],
  });
  const derive = observedGauges<DeriveStats>(registry);
  const deriveGauge = derive.gauge;
  deriveGauge('derive_rounds', 'Rounds of the derive job completed by this process', (s) => s.rounds);
  deriveGauge('derive_failed_rounds', 'Rounds of the derive job that failed (their marks are read again)', (s) => s.failures);
  deriveGauge('derive_periods', 'Venue periods recomputed from the raw table by this process', (s) => s.periods);
  deriveGauge('derive_visit_periods', 'Venue periods whose visits were recomputed (they had new sightings)', (s) => s.visitPeriods);
  deriveGauge(
    'derive_occupancy_periods',
    'Venue periods whose occupancy history was recomputed (they had new door flows)',
    (s) => s.occupancyPeriods,
  );
  deriveGauge('derive_carried_periods', 'Venue periods a round left to the next (its time budget was spent)', (s) => s.carriedPeriods);
  deriveGauge('derive_backlog_periods', 'Venue periods the last round left to the next', (s) => s.backlogPeriods);
  deriveGauge('derive_rows_written', 'Derived rows (visits, occupancy points) written or removed', (s) => s.rowsWritten);
  deriveGauge('derive_last_round_seconds', 'Duration of the last derive round', (s) => s.lastRoundMs / 1000);
  deriveGauge(
    'derive_lag_seconds',
    'How far behind the raw table the derived history is: the cursor age, or while rounds carry periods over, the time since the first of them',
    (s) => s.lagSeconds,
  );
  deriveGauge('derive_leading', '1 when this process runs the derive job (one process at a time does)', (s) => (s.leading ? 1 : 0));
  const pollers = observedGauges<RunningPollers>(registry);
  const pollerGauge = pollers.gauge;
  pollerGauge('poller_polls', 'Vendor polls started by this process (UniFi, Verkada, Aruba ALE)', (p) => p.stats.polls);
  pollerGauge(
    'poller_failed_polls',
    'Vendor polls that failed (the integration backs off; connector health is told)',
    (p) => p.stats.failures,
  );
  pollerGauge('poller_events', 'Events polled and accepted by ingest', (p) => p.stats.events);
  pollerGauge('poller_integrations_owned', 'Integrations this process holds the polling lease of', (p) => p.owned().length);
  const sink = observedGauges<SinkStats>(registry);
  sink.gauge('events_sink_replayed_rows', 'Events found already stored at their Kafka position (a replay) and skipped', (s) => s.skipped);
  sink.gauge(
    'events_sink_duplicates',
    'Re-delivered events (a derived id already stored or earlier in the batch) dropped',
    (s) => s.duplicates,
  );
  sink.gauge('events_sink_dead_lettered', 'Events sent to the dead-letter topic', (s) => s.deadLettered);
  sink.labelled(
    'events_sink_id_checks',
    'Events with a derived id checked for re-delivery, by where the answer came from: ClickHouse, or the memory of ids stored lately',
    'answered',
    (s) => ({ clickhouse: s.idsLookedUp, memory: s.idsKnownNew }),
  );
  new Gauge({
    name: 'kafka_consumer_lag',
    help: 'Messages between a consumer group’s committed offset and the end of the partition',
    labelNames: ['group', 'topic', 'partition'],
    registers: [registry],
    async collect() {
      this.reset();
      try {
        for (const [labels, lag] of await consumerLag(admin, prefix)) this.set(labels, lag);
      } catch (err) {
        log.warn({ err }, 'consumer lag not collected this scrape (Kafka unavailable)');
      }
    },
  });
  return {
    registry,
    observeInsert(target, n, seconds) {
      rows.inc({ target }, n);
      inserts.observe({ target }, seconds);
    },
    observeHousekeeping(action, table) {
      housekeeping.inc({ action, table });
    },
    observeDerive: derive.observe,
    observePollers: pollers.observe,
    observeEventsSink: sink.observe,
    unreflected(venueId, reason, count) {
      unreflected.inc({ venue_id: venueId, reason }, count);
    },
  };
}

type LagLabels = { group: string; topic: string; partition: string };

/** Lag per (group, topic, partition) of the deployment's groups (the edges' own groups excepted: they start at the end). */
export async function consumerLag(admin: Admin, prefix: string): Promise<Array<[LagLabels, number]>> {
  const { groups } = await admin.listGroups();
  const mine = groups.map((g) => g.groupId).filter((id) => id.startsWith(`${prefix}.`) && !id.startsWith(`${prefix}.edge.`));
  const ends = new Map<string, Map<number, bigint>>();
  const endOf = async (topic: string) => {
    let e = ends.get(topic);
    if (!e) {
      e = new Map((await topicOffsets(admin, topic, 5000)).map((p) => [p.partition, BigInt(p.high)]));
      ends.set(topic, e);
    }
    return e;
  };
  const out: Array<[LagLabels, number]> = [];
  for (const group of mine) {
    for (const { topic, partitions } of await admin.fetchOffsets({ groupId: group })) {
      const committedAt = new Map(partitions.map((p) => [p.partition, BigInt(p.offset)]));
      // Every partition of the topic: one the group never committed has all of it still to read.
      for (const [partition, high] of await endOf(topic)) {
        const at = committedAt.get(partition) ?? -1n;
        const committed = at < 0n ? 0n : at;
        out.push([{ group, topic, partition: String(partition) }, Number(high > committed ? high - committed : 0n)]);
      }
    }
  }
  return out;
}
