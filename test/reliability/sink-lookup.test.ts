import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createCh } from '../../clickhouse/client.js';
import { STORED_IDS_CHUNK, storedEventIds } from '../../clickhouse/queries/events.js';
import { testConfig } from '../support/env.js';

const ch = createCh(testConfig());
afterAll(async () => {
  await ch.close();
});

describe("the sink's lookup of stored event ids", () => {
  // Found by the chaos runner: a sink batch of 10,000 events that all carry event ids made a query
  // over ClickHouse's max_query_size (256 KiB), failed on every retry and stalled the partition.
  it('answers for a batch of ids far beyond one query (looked up in chunks)', async () => {
    const venues = [randomUUID(), randomUUID()];
    const operatorId = randomUUID();
    const now = Math.floor(Date.now() / 1000);
    const candidates = Array.from({ length: STORED_IDS_CHUNK * 5 + 7 }, (_, i) => ({ event_id: randomUUID(), operator_id: operatorId, venue_id: venues[i % 2]!, ts: now - i }));
    const stored = await storedEventIds(ch, candidates);
    expect(stored.size).toBe(0);
  });
});
