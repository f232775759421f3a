import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chExec, chRows, chsql, createCh, raw, type Ch } from '../../clickhouse/client.js';
import { migrateClickhouse, serverExecutor } from '../../clickhouse/migrate.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { COMPACTED_TABLES } from '../../clickhouse/queries/retention.js';
import { compactClosedPartitions, isClosed } from '../../pipeline/compaction.js';
import { createHousekeepingCh, scheduleHousekeeping } from '../../pipeline/housekeeping.js';
import { createPipelineMetrics } from '../../apps/pipeline/metrics.js';
import { createKafka } from '../../lib/kafka.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { createLogger } from '../../lib/logger.js';
import { testConfig } from '../support/env.js';
import { event } from './harness.js';

const HOUR = 3_600_000;
const DAY = 86_400_000;

describe('closed partitions', () => {
  it('are those whose day or month ended an hour ago (a local day one day later)', () => {
    const end = Date.UTC(2026, 10, 21);
    expect(isClosed('telemetry_1m', '7-20261120', end + HOUR - 1)).toBe(false);
    expect(isClosed('telemetry_1m', '7-20261120', end + HOUR)).toBe(true);
    expect(isClosed('telemetry_1d', '7-20261120', end + HOUR)).toBe(false);
    expect(isClosed('telemetry_1d', '7-20261120', end + DAY + HOUR)).toBe(true);
    expect(isClosed('telemetry_1h', '365-202611', Date.UTC(2026, 10, 30))).toBe(false);
    expect(isClosed('telemetry_1h', '365-202611', Date.UTC(2026, 11, 1) + HOUR)).toBe(true);
  });
});

/*
 * In a database of its own: background merges are stopped while the parts are laid out, which
 * would disturb other suites' tables.
 */
describe('the compaction job', () => {
  const cfg = testConfig();
  const database = `${cfg.CLICKHOUSE_DATABASE}_compaction`;
  const log = createLogger('compaction-test', cfg.LOG_LEVEL);
  const admin = createCh(cfg, null);
  let ch: Ch;
  const operatorId = randomUUID();
  const venueId = randomUUID();
  const now = Date.now();
  const closedDay = Math.floor((now - 3 * DAY) / DAY) * DAY + 10 * HOUR;

  /** Each rollup's answer for the venue: what compaction must not change. */
  const answers = () =>
    Promise.all(
      COMPACTED_TABLES.map((table) =>
        chRows<{ key: string; sum: number; count: number; devices: number }>(
          ch,
          chsql`SELECT key, sumMerge(v_sum) AS sum, toUInt32(countMerge(v_count)) AS count, toUInt32(uniqExactMerge(devices)) AS devices
                  FROM ${raw(table)} WHERE venue_id = toUUID(${venueId}) GROUP BY key ORDER BY key`,
        ),
      ),
    );
  const partsOf = (table: string, partitionId: string) =>
    chRows<{ n: number }>(
      ch,
      chsql`SELECT toUInt32(count()) AS n FROM system.parts WHERE database = currentDatabase() AND active AND table = ${table} AND partition_id = ${partitionId}`,
    ).then((r) => r[0]!.n);

  beforeAll(async () => {
    await migrateClickhouse(serverExecutor(admin), database);
    ch = createCh(cfg, database);
  });
  afterAll(async () => {
    await ch?.close();
    await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
    await admin.close();
  });

  it('merges each closed partition of the rollups into one part, leaves the open ones, and changes no answer', async () => {
    for (const table of COMPACTED_TABLES) await chExec(ch, `SYSTEM STOP MERGES ${table}`);
    let offset = 0;
    // Three writes, each of the closed day and of the hour just gone: three parts in every partition.
    for (let write = 0; write < 3; write++) {
      const rows = [closedDay, now - HOUR].flatMap((t) =>
        [0, 1].map((i) =>
          toRow(
            event({
              operatorId,
              venueId,
              ts: t + write * 60_000 + i,
              type: 'device_seen',
              device: `dev-${write}-${i}`,
              metrics: { temperature: 20 + write + i },
            }),
            { topic: 'compaction-test', partition: 0, offset: String(offset++), index: 0 },
            { timezone: 'UTC', retentionDays: 7 },
          ),
        ),
      );
      await insertEvents(ch, rows);
    }
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');
    const closed = `7-${day(closedDay)}`;
    const open = `7-${day(now - HOUR)}`;
    for (const table of COMPACTED_TABLES) expect(await partsOf(table, closed), table).toBe(3);
    const before = await answers();
    for (const table of COMPACTED_TABLES) await chExec(ch, `SYSTEM START MERGES ${table}`);

    // Stopped (the pipeline shutting down): nothing is started.
    expect(await compactClosedPartitions(ch, log, { now, signal: AbortSignal.abort() })).toEqual([]);
    const compacted = await compactClosedPartitions(ch, log, { now });

    for (const table of COMPACTED_TABLES) {
      expect(compacted, table).toContainEqual({ table, partitionId: closed, parts: 3 });
      expect(await partsOf(table, closed), table).toBe(1);
    }
    // Today's partition (yesterday's too, for the daily rollup of local days) is still written to.
    expect(compacted.map((c) => c.partitionId)).not.toContain(open);
    expect(await answers()).toEqual(before);
    const temperatures = [0, 1, 2].flatMap((write) => [0, 1].map((i) => 20 + write + i));
    const sum = 2 * temperatures.reduce((a, b) => a + b, 0);
    expect(before[0]!.find((r) => r.key === 'temperature')).toEqual({ key: 'temperature', sum, count: 12, devices: 0 });
    // Nothing left to merge: the next run does nothing.
    expect(await compactClosedPartitions(ch, log, { now })).toEqual([]);
  });

  it('runs in the pipeline’s housekeeping, which counts what it compacted in the metrics', async () => {
    const day = closedDay - DAY;
    for (const table of COMPACTED_TABLES) await chExec(ch, `SYSTEM STOP MERGES ${table}`);
    for (let write = 0; write < 2; write++) {
      await insertEvents(ch, [
        toRow(
          event({ operatorId, venueId, ts: day + write * 60_000, metrics: { temperature: 20 } }),
          { topic: 'compaction-test', partition: 1, offset: String(write), index: 0 },
          { timezone: 'UTC', retentionDays: 7 },
        ),
      ]);
    }
    const metrics = createPipelineMetrics(createKafka(cfg, log, 'compaction-test').admin(), cfg.KAFKA_TOPIC_PREFIX, log);
    const compacted = async (table: string) => {
      const text = await metrics.registry.getSingleMetricAsString('clickhouse_housekeeping_partitions_total');
      const line = text.split('\n').find((l) => l.includes('action="compacted"') && l.includes(`table="${table}"`));
      return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    for (const table of COMPACTED_TABLES) await chExec(ch, `SYSTEM START MERGES ${table}`);
    const housekeepingCh = createHousekeepingCh(cfg, log, database);
    const housekeeping = scheduleHousekeeping(housekeepingCh, log, { onPartition: metrics.observeHousekeeping });
    try {
      const deadline = Date.now() + 30_000;
      while ((await Promise.all(COMPACTED_TABLES.map(compacted))).some((n) => n === 0) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
    } finally {
      await housekeeping.stop();
      await housekeepingCh.close();
    }
    for (const table of COMPACTED_TABLES) expect(await compacted(table), table).toBeGreaterThanOrEqual(1);
    const day7 = `7-${new Date(day).toISOString().slice(0, 10).replaceAll('-', '')}`;
    for (const table of COMPACTED_TABLES) expect(await partsOf(table, day7), table).toBe(1);
  });
});
