import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { insertEvents, type EventRow } from '../../clickhouse/queries/events.js';
import { eventsTarget } from '../../pipeline/sink/events-sink.js';
import type { SinkTarget } from '../../pipeline/sink/target.js';
import { allCommitted, event, newTenant, openHarness, produce, rawCount, startSink, waitFor, type Harness } from './harness.js';

// What a sink may assume about a partition it owns: whose writes it must look up, and when its
// memory of recent ids can answer for ClickHouse (docs/pipeline.md#vendor-re-deliveries).
let h: Harness;
beforeEach(async () => {
  h = await openHarness();
});
afterEach(async () => {
  await h.close();
});

const group = () => `sink-own-${randomUUID()}`;
/** Ingest derives the ids of events with a vendor or own event id as version-8 UUIDs. */
const derivedId = () => randomUUID().replace(/^(.{14})./, '$18');

/** `n` transactions of one venue with derived ids, `stepMs` apart from `from`. */
function payments(t: { operatorId: string; venueIds: string[] }, n: number, from: number, stepMs = 10): CanonicalEvent[] {
  return Array.from({ length: n }, (_, i) =>
    event({
      id: derivedId(),
      operatorId: t.operatorId,
      venueId: t.venueIds[0]!,
      ts: from + i * stepMs,
      type: 'transaction',
      metrics: { amount: 100 + i },
    }),
  );
}

/** The same events sent again later (a vendor re-delivery: same ids and times, a new Kafka message). */
const again = (events: CanonicalEvent[]) => events.map((e) => ({ ...e, receivedAt: e.receivedAt + 60_000 }));

describe('events sink: a partition it owns', () => {
  it('after another member crashed between insert and commit, looks up every position that member may have written, past its own first batch', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    // One venue, so one partition, holding more than one fetch (4 MB a partition): the crashed
    // member held two fetches in one insert, the next one commits its first fetch alone.
    const events = payments(t, 20_000, Date.now() - 3_600_000, 100).map((e) => ({
      ...e,
      id: randomUUID(),
      payload: { note: 'x'.repeat(200) },
    }));
    await produce(h, events);
    const g = group();
    let crashed = false;
    const first = await startSink(h, g, {
      batchRows: 100_000,
      batchMs: 5000,
      afterInsert: async () => {
        if (!crashed) void first.consumer.consumer.stop();
        crashed = true;
        throw new Error('simulated crash between insert and commit');
      },
    });
    await waitFor('the crash', async () => crashed, 60_000);
    await first.consumer.stop();
    expect(await rawCount(h)).toBe(events.length);

    const second = await startSink(h, g, { batchRows: 1000 });
    try {
      await allCommitted(h, g, 60_000);
      expect(second.sink.stats.commits).toBeGreaterThan(1);
      expect(second.sink.stats.skipped).toBe(events.length);
      expect(await rawCount(h)).toBe(events.length);
    } finally {
      await second.stop();
    }
  });

  it('answers live traffic from its memory of the ids it stored, and still drops every re-delivery', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    // Event times after the sink took the partition: with no trust delay, memory answers for them.
    const first = payments(t, 300, Date.now() + 60_000);
    const later = payments(t, 200, Date.now() + 90_000);
    const g = group();
    const s = await startSink(h, g, { recentIds: { trustAfterMs: 0 } });
    try {
      await produce(h, first);
      await allCommitted(h, g);
      await produce(h, [...later.slice(0, 100), ...again(first.slice(0, 50)), ...later.slice(100)]);
      await allCommitted(h, g);
      expect(await rawCount(h)).toBe(500);
      expect(s.sink.stats.duplicates).toBe(50);
      expect(s.sink.stats.idsKnownNew).toBe(500);
      expect(s.sink.stats.idsLookedUp).toBe(50);
    } finally {
      await s.stop();
    }
  });

  it('looks up live re-deliveries of what the previous owner stored, for as long as that owner’s events can reach', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    // Up to the 5 minutes ahead ingest accepts: the previous owner stored them before this one took over.
    const stored = [...payments(t, 100, Date.now() - 1000), ...payments(t, 100, Date.now() + 4 * 60_000)];
    const g = group();
    const a = await startSink(h, g);
    await produce(h, stored);
    await allCommitted(h, g);
    await a.stop();
    const b = await startSink(h, g);
    try {
      const fresh = payments(t, 50, Date.now());
      await produce(h, [...again(stored), ...fresh]);
      await allCommitted(h, g);
      expect(await rawCount(h)).toBe(250);
      expect(b.sink.stats.duplicates).toBe(200);
      expect(a.sink.stats.idsKnownNew + b.sink.stats.idsKnownNew).toBe(0);
    } finally {
      await b.stop();
    }
  });

  it('after an insert that stored part of its rows and failed, drops re-deliveries of the part it stored', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    const events = payments(t, 200, Date.now() + 60_000);
    let cut = false;
    const target: SinkTarget<EventRow> = {
      ...eventsTarget(h.db),
      async insert(ch, rows) {
        if (cut) return insertEvents(ch, rows);
        cut = true;
        await insertEvents(ch, rows.slice(0, rows.length / 2));
        throw new Error('connection reset after half the rows');
      },
    };
    const g = group();
    const s = await startSink(h, g, { recentIds: { trustAfterMs: 0 } }, target);
    try {
      await produce(h, events);
      await allCommitted(h, g);
      expect(await rawCount(h)).toBe(200);
      expect(s.sink.stats.skipped).toBe(100);
      await produce(h, again(events));
      await allCommitted(h, g);
      expect(await rawCount(h)).toBe(200);
      expect(s.sink.stats.duplicates).toBe(200);
    } finally {
      await s.stop();
    }
  });
});
