import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createCh } from '../../clickhouse/client.js';
import { insertEvents, STORED_IDS_CHUNK, storedEventIds } from '../../clickhouse/queries/events.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { event } from '../pipeline/harness.js';
import { testConfig } from '../support/env.js';

const ch = createCh(testConfig());
afterAll(async () => {
  await ch.close();
});

describe("the sink's lookup of stored event ids", () => {
  // Found by the chaos runner: a sink batch of 10,000 events that all carry event ids made a query
  // over ClickHouse's max_query_size (256 KiB), failed on every retry and stalled the partition.
  it('answers for a batch of ids far beyond one query (looked up in chunks), finding the stored ones of every venue and chunk', async () => {
    const venues = [randomUUID(), randomUUID()];
    const operatorId = randomUUID();
    const now = Math.floor(Date.now() / 1000);
    const candidates = Array.from({ length: STORED_IDS_CHUNK * 5 + 7 }, (_, i) => ({
      event_id: randomUUID(),
      operator_id: operatorId,
      venue_id: venues[i % 2]!,
      ts: now - i,
    }));
    // Stored: the oldest and the newest candidate of each venue, which land in different chunks.
    const picked = [candidates[0]!, candidates[1]!, candidates.at(-1)!, candidates.at(-2)!];
    await insertEvents(
      ch,
      picked.map((c, i) =>
        toRow(
          event({ id: c.event_id, operatorId, venueId: c.venue_id, ts: c.ts * 1000 }),
          { topic: 'sink-lookup', partition: 0, offset: String(i), index: 0 },
          { timezone: 'UTC', retentionDays: 365 },
        ),
      ),
    );
    const stored = await storedEventIds(ch, candidates);
    expect([...stored].sort()).toEqual(picked.map((c) => c.event_id).sort());
  });
});
