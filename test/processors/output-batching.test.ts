import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql } from '../../clickhouse/client.js';
import type { RunningProcessors } from '../../pipeline/processors/run.js';
import { committedToEnd, event, newVenue, openProcHarness, produce, startProcessors, waitFor, type ProcHarness } from './harness.js';

// The processors' output sinks batch on their own deadline (PIPELINE_DERIVED_BATCH_MS), longer
// than the raw events': occupancy history lands in ClickHouse in fewer, larger inserts.
const OUTPUT_BATCH_MS = 4_000;

let h: ProcHarness;
let run: RunningProcessors;

beforeAll(async () => {
  h = await openProcHarness();
  run = await startProcessors(h, ['occupancy'], 300, OUTPUT_BATCH_MS);
});

afterAll(async () => {
  await run?.stop();
  await h.close();
});

const stored = async (venueId: string) =>
  (await chRows<{ n: number }>(h.ch, chsql`SELECT toUInt32(count()) AS n FROM occupancy_updates WHERE venue_id = toUUID(${venueId})`))[0]!.n;

describe('output sinks', () => {
  it('hold the processors’ outputs until their own deadline, then store every one', async () => {
    const venue = await newVenue(h.db);
    const ts = Date.now() - 60_000;
    await produce(h, [
      event({ ...venue, connectorType: 'density', type: 'entry', ts, metrics: { entries: 2 } }),
      event({ ...venue, connectorType: 'density', type: 'entry', ts: ts + 1_000, metrics: { entries: 3 } }),
    ]);
    // The updates are in the output topic, committed...
    await committedToEnd(h.admin, `${h.prefix}.proc.occupancy`, h.topics.events);
    const committedAt = Date.now();
    // ...and the sink, which reads them at once, holds them well past the raw events' deadline.
    await new Promise((r) => setTimeout(r, 1_000));
    if (Date.now() - committedAt < OUTPUT_BATCH_MS - 500) expect(await stored(venue.venueId)).toBe(0);
    await waitFor('the occupancy updates in ClickHouse', async () => (await stored(venue.venueId)) === 2, 30_000);
    const rows = await chRows<{ value: number }>(h.ch, chsql`SELECT value FROM occupancy_updates WHERE venue_id = toUUID(${venue.venueId}) AND zone_id = '' ORDER BY ts`);
    expect(rows.map((r) => r.value)).toEqual([2, 5]);
  });
});
