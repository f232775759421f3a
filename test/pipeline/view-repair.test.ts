import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chExec } from '../../clickhouse/client.js';
import { insertEvents, type EventRow } from '../../clickhouse/queries/events.js';
import { eventsTarget } from '../../pipeline/sink/events-sink.js';
import { runSink, type SinkTarget } from '../../pipeline/sink/sink.js';
import {
  allCommitted,
  deviceId,
  event,
  expectedTotals,
  newTenant,
  openHarness,
  produce,
  rawCount,
  rollupTotals,
  waitFor,
  type Harness,
} from './harness.js';

/*
 * The sink's side of docs/pipeline.md#materialized-views-and-partial-failure: an insert that stored its raw
 * rows, lost its views' rows and failed is retried (the rows are found stored and skipped), and the
 * views are then repaired from the raw rows. Runs alone (vitest.config.ts SERIAL): the cut detaches
 * the run database's views for a moment.
 */
const VIEWS = ['telemetry_1m_mv', 'telemetry_1h_mv', 'telemetry_1d_mv', 'retention_classes_events_mv', 'derive_marks_mv'];

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h?.close();
});

describe('the events sink after an insert cut between the raw rows and their views', () => {
  it('stores every event once and repairs every rollup to what the events imply', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC', 'Asia/Kolkata']);
    const end = Date.now();
    const events = Array.from({ length: 600 }, (_, i) =>
      event({
        operatorId: t.operatorId,
        venueId: t.venueIds[i % 2]!,
        ts: end - 3_600_000 + i * 5_000,
        type: i % 3 ? 'environment' : 'device_seen',
        device: i % 3 ? null : deviceId(`dev-${i % 23}`),
        metrics: i % 3 ? { temperature: 18 + (i % 40) / 10 } : {},
      }),
    );
    let cuts = 0;
    const target: SinkTarget<EventRow> = {
      ...eventsTarget(h.db),
      async insert(ch, rows) {
        if (cuts > 0) return insertEvents(ch, rows);
        cuts++;
        for (const v of VIEWS) await chExec(ch, `DETACH TABLE ${v}`);
        try {
          await insertEvents(ch, rows);
        } finally {
          for (const v of VIEWS) await chExec(ch, `ATTACH TABLE ${v}`);
        }
        throw new Error('connection reset: the server died between the raw part and the views');
      },
    };
    await produce(h, events);
    const groupId = `view-repair-${randomUUID().slice(0, 8)}`;
    const s = await runSink(h.kafka, target, {
      groupId,
      partitions: h.cfg.KAFKA_PARTITIONS,
      ch: h.ch,
      db: h.db,
      producer: h.producer,
      topics: h.topics,
      log: h.log,
      batchRows: 250,
      batchMs: 200,
      drainMs: 5000,
      retry: { initialMs: 100, maxMs: 400 },
    });
    try {
      await allCommitted(h, groupId);
      await waitFor('the views repaired', async () => s.sink.stats.viewRepairs > 0);
      expect(cuts).toBe(1);
      expect(s.sink.stats.skipped).toBeGreaterThan(0);
      expect(s.sink.stats.viewRowsToppedUp).toBeGreaterThan(0);
      expect(s.sink.stats.viewRepairsAbandoned).toBe(0);
      expect(await rawCount(h)).toBe(events.length);
      const want = expectedTotals(events);
      for (const table of ['telemetry_1m', 'telemetry_1h', 'telemetry_1d'] as const) {
        const got = await rollupTotals(h, table, t.venueIds);
        for (const [key, w] of Object.entries(want)) {
          if (key === 'devices') {
            if (table !== 'telemetry_1d') expect(got[key]!.devices, `${table} devices`).toBe(w.devices);
            continue;
          }
          expect(got[key]!.count, `${table} ${key} count`).toBe(w.count);
          expect(got[key]!.sum, `${table} ${key} sum`).toBeCloseTo(w.sum, 6);
          expect(got[key]!.min, `${table} ${key} min`).toBe(w.min);
          expect(got[key]!.max, `${table} ${key} max`).toBe(w.max);
        }
      }
    } finally {
      await s.stop();
    }
  });
});
