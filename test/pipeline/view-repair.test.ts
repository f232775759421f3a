import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  allCommitted,
  cutOnceTarget,
  deviceId,
  event,
  expectRollupsOf,
  newTenant,
  openHarness,
  produce,
  rawCount,
  startSink,
  waitFor,
  type Harness,
} from './harness.js';

/*
 * The sink's side of docs/pipeline.md#materialized-views-and-partial-failure: an insert that stored
 * its raw rows, lost its views' rows and failed is retried (the rows are found stored and skipped),
 * and the views are then repaired from the raw rows. Runs alone (vitest.config.ts SERIAL): the cut
 * detaches the run database's views for a moment.
 */
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
    const target = cutOnceTarget(h.db);
    await produce(h, events);
    const groupId = `view-repair-${randomUUID().slice(0, 8)}`;
    const s = await startSink(h, groupId, { batchRows: 250 }, target);
    try {
      await allCommitted(h, groupId);
      await waitFor('the views repaired', async () => s.sink.stats.viewRepairs > 0);
      expect(target.inserts()).toBeGreaterThan(1);
      expect(s.sink.stats.skipped).toBeGreaterThan(0);
      expect(s.sink.stats.viewRowsToppedUp).toBeGreaterThan(0);
      expect(s.sink.stats.viewRepairsAbandoned).toBe(0);
      expect(await rawCount(h)).toBe(events.length);
      await expectRollupsOf(h, events, t.venueIds);
    } finally {
      await s.stop();
    }
  });
});
