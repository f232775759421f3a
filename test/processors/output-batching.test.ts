import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql } from '../../clickhouse/client.js';
import type { RunningProcessors } from '../../pipeline/processors/run.js';
import { committedToEnd, event, newVenue, openProcHarness, produce, startProcessors, type ProcHarness } from './harness.js';

// The processors' output sinks batch on their own deadline (PIPELINE_DERIVED_BATCH_MS), longer
// than the raw events' (100 ms here): occupancy history lands in ClickHouse in fewer, larger inserts.
// A deadline longer than the test, so only the shutdown's drain can write what the sink holds.
const OUTPUT_BATCH_MS = 120_000;

let h: ProcHarness;
let run: RunningProcessors | undefined;

beforeAll(async () => {
  h = await openProcHarness();
  run = await startProcessors(h, ['occupancy'], 300, OUTPUT_BATCH_MS);
});

afterAll(async () => {
  await run?.stop();
  await h.close();
});

const venueRows = async (venueId: string) =>
  chRows<{ value: number }>(
    h.ch,
    chsql`SELECT value FROM occupancy_updates WHERE venue_id = toUUID(${venueId}) AND zone_id = '' ORDER BY ts`,
  );

describe('output sinks', () => {
  it('hold the processors’ outputs until their own deadline (here: the shutdown), then store every one', async () => {
    const venue = await newVenue(h.db);
    const ts = Date.now() - 60_000;
    await produce(h, [
      event({ ...venue, connectorType: 'density', type: 'entry', ts, metrics: { entries: 2 } }),
      event({ ...venue, connectorType: 'density', type: 'entry', ts: ts + 1_000, metrics: { entries: 3 } }),
    ]);
    // The updates are committed in the output topic, and the sink reads them at once...
    await committedToEnd(h.admin, `${h.prefix}.proc.occupancy`, h.topics.events);
    // ...but holds them well past the raw events' deadline.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await venueRows(venue.venueId)).toEqual([]);
    // Stopping drains what the sinks hold.
    await run!.stop();
    run = undefined;
    expect((await venueRows(venue.venueId)).map((r) => r.value)).toEqual([2, 5]);
  });
});
