import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPipelineMetrics } from '../../apps/pipeline/metrics.js';
import { serveMetrics, type MetricsServer } from '../../lib/metrics.js';
import { allCommitted, event, newTenant, openHarness, produce, startSink, type Harness } from './harness.js';
import { topicOffsets } from '../../lib/kafka.js';

let h: Harness;
let server: MetricsServer;
let metrics: ReturnType<typeof createPipelineMetrics>;
beforeAll(async () => {
  h = await openHarness();
  metrics = createPipelineMetrics(h.admin, h.cfg.KAFKA_TOPIC_PREFIX, h.log);
  server = await serveMetrics(metrics.registry, '127.0.0.1', 0, h.log);
});
afterAll(async () => {
  await server.close();
  await h.close();
});

async function series(): Promise<string[]> {
  return (await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text()).split('\n');
}
const valueOf = (lines: string[], prefix: string, ...parts: string[]) => {
  const line = lines.find((l) => l.startsWith(prefix) && parts.every((p) => l.includes(p)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
};

describe('the pipeline’s Prometheus metrics', () => {
  it('count inserted rows and their latency per sink target, the sink’s re-delivery checks, and each group’s lag per partition', async () => {
    const { operatorId, venueIds } = await newTenant(h.db, 'pro', ['Europe/Berlin']);
    const now = Date.now();
    // Half with derived ids (a vendor's or their own event_id), two of those delivered twice.
    const events = Array.from({ length: 40 }, (_, i) =>
      event({
        ...(i < 20 ? { id: randomUUID().replace(/^(.{14})./, '$18') } : {}),
        operatorId,
        venueId: venueIds[0]!,
        ts: now - i * 1000,
        metrics: { temperature: 20 + i },
      }),
    );
    await produce(h, [...events, events[0]!, events[1]!]);
    const group = `${h.cfg.KAFKA_TOPIC_PREFIX}.metrics-test-sink`;
    // Before any member read anything, the whole backlog is lag.
    const idle = `${h.cfg.KAFKA_TOPIC_PREFIX}.metrics-test-idle`;
    await h.admin.setOffsets({
      groupId: idle,
      topic: h.topics.events,
      partitions: (await topicOffsets(h.admin, h.topics.events)).map((p) => ({ partition: p.partition, offset: '0' })),
    });
    const sink = await startSink(h, group, { onInsert: metrics.observeInsert });
    metrics.observeEventsSink(sink.sink.stats);
    try {
      await allCommitted(h, group);
      const lines = await series();
      expect(valueOf(lines, 'clickhouse_insert_rows_total{', 'target="events"')).toBe(40);
      expect(valueOf(lines, 'events_sink_duplicates{')).toBe(2);
      expect(valueOf(lines, 'events_sink_replayed_rows{')).toBe(0);
      // Event times from before the sink took the partitions: every check is a look-up.
      expect(valueOf(lines, 'events_sink_id_checks{', 'answered="clickhouse"')).toBe(22);
      expect(valueOf(lines, 'events_sink_id_checks{', 'answered="memory"')).toBe(0);
      expect(valueOf(lines, 'clickhouse_insert_duration_seconds_count{', 'target="events"')).toBeGreaterThanOrEqual(1);
      const lag = (g: string) =>
        lines.filter((l) => l.startsWith('kafka_consumer_lag{') && l.includes(`group="${g}"`) && l.includes(`topic="${h.topics.events}"`));
      expect(lag(group).length).toBe(h.cfg.KAFKA_PARTITIONS);
      expect(lag(group).map((l) => Number(l.slice(l.lastIndexOf(' ') + 1)))).toEqual(Array(h.cfg.KAFKA_PARTITIONS).fill(0));
      expect(
        lag(idle)
          .map((l) => Number(l.slice(l.lastIndexOf(' ') + 1)))
          .reduce((a, b) => a + b, 0),
      ).toBe(42);
    } finally {
      await sink.stop();
    }
  });
});

describe('the derive job’s and the live figures’ metrics', () => {
  it('show the job’s progress and count unreflected events per venue and reason', async () => {
    const stats = {
      rounds: 3,
      failures: 1,
      periods: 12,
      rowsWritten: 340,
      visitPeriods: 9,
      occupancyPeriods: 5,
      carriedPeriods: 7,
      backlogPeriods: 2,
      lastRoundMs: 250,
      lagSeconds: 4,
      leading: true,
    };
    metrics.observeDerive(stats);
    metrics.unreflected('venue-1', 'duplicate', 2);
    metrics.unreflected('venue-1', 'duplicate', 1);
    metrics.unreflected('venue-2', 'earlier_day', 5);
    let lines = await series();
    expect(valueOf(lines, 'derive_rounds{')).toBe(3);
    expect(valueOf(lines, 'derive_failed_rounds{')).toBe(1);
    expect(valueOf(lines, 'derive_rows_written{')).toBe(340);
    expect(valueOf(lines, 'derive_visit_periods{')).toBe(9);
    expect(valueOf(lines, 'derive_occupancy_periods{')).toBe(5);
    expect(valueOf(lines, 'derive_carried_periods{')).toBe(7);
    expect(valueOf(lines, 'derive_backlog_periods{')).toBe(2);
    expect(valueOf(lines, 'derive_last_round_seconds{')).toBe(0.25);
    expect(valueOf(lines, 'derive_lag_seconds{')).toBe(4);
    expect(valueOf(lines, 'derive_leading{')).toBe(1);
    expect(valueOf(lines, 'venue_events_unreflected_total{', 'venue_id="venue-1"', 'reason="duplicate"')).toBe(3);
    expect(valueOf(lines, 'venue_events_unreflected_total{', 'venue_id="venue-2"', 'reason="earlier_day"')).toBe(5);
    // Read at each scrape: the job's figures move without another call.
    stats.rounds = 4;
    stats.leading = false;
    lines = await series();
    expect(valueOf(lines, 'derive_rounds{')).toBe(4);
    expect(valueOf(lines, 'derive_leading{')).toBe(0);
  });

  it("show the vendor pollers' polls, failures, events and owned integrations at each scrape", async () => {
    const stats = { polls: 7, failures: 2, events: 120 };
    let owned = ['a', 'b'];
    metrics.observePollers({ owner: 'me', owned: () => owned, stats, stop: async () => undefined });
    let lines = await series();
    expect([
      valueOf(lines, 'poller_polls{'),
      valueOf(lines, 'poller_failed_polls{'),
      valueOf(lines, 'poller_events{'),
      valueOf(lines, 'poller_integrations_owned{'),
    ]).toEqual([7, 2, 120, 2]);
    stats.polls = 8;
    owned = [];
    lines = await series();
    expect([valueOf(lines, 'poller_polls{'), valueOf(lines, 'poller_integrations_owned{')]).toEqual([8, 0]);
  });
});
