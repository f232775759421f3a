import { afterEach, describe, expect, it } from 'vitest';
import { decodeOccupancyUpdate } from '../../lib/events/derived.js';
import { createOccupancyProcessor, type OccupancyState } from '../../pipeline/processors/occupancy.js';
import { ProcessorRuntime } from '../../pipeline/processors/runtime.js';
import type { Processor } from '../../pipeline/processors/processor.js';
import { VenueInfos } from '../../pipeline/processors/venues.js';
import { committedToEnd, event, newVenue, openProcHarness, produce, readAll, waitFor, type ProcHarness } from './harness.js';

/*
 * A processor commits a partition's batches together, at most its commit interval after they were
 * processed (docs/processors.md#the-runtime-exactly-once-state-and-outputs). Every test has its own
 * topics; one venue's entries into a zone, one message each, make the occupancy 1, 2, 3, …
 */

let h: ProcHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function setUp(): Promise<{
  h: ProcHarness;
  entry: (i: number) => Promise<void>;
  zoneValues: () => Promise<number[]>;
  committed: () => Promise<number>;
}> {
  const harness = (h = await openProcHarness());
  const venue = await newVenue(harness.db, { zones: [{ slug: 'hall', type: 'area', capacity: 100 }] });
  const hall = venue.zones.hall!;
  const t = Date.now() - 60_000;
  return {
    h: harness,
    entry: (i) =>
      produce(harness, [
        event({
          operatorId: venue.operatorId,
          venueId: venue.venueId,
          ts: t + i * 1000,
          type: 'entry',
          zoneId: hall,
          connectorType: 'density',
          metrics: { entries: 1 },
        }),
      ]),
    zoneValues: async () =>
      (await readAll(harness, harness.derived.occupancy, 1000))
        .map((m) => decodeOccupancyUpdate(m.value))
        .filter((u) => u.zoneId === hall)
        .map((u) => u.value),
    committed: async () => {
      const [group] = await harness.admin.fetchOffsets({ groupId: `${harness.prefix}.proc.occupancy`, topics: [harness.topics.events] });
      return group!.partitions.reduce((n, p) => n + Math.max(0, Number(p.offset)), 0);
    },
  };
}

const runtimeOf = (harness: ProcHarness, processor: Processor<OccupancyState>, commitIntervalMs: number) =>
  new ProcessorRuntime(processor as Processor<unknown>, {
    kafka: harness.kafka,
    log: harness.log,
    prefix: harness.prefix,
    partitions: harness.cfg.KAFKA_PARTITIONS,
    tickMs: 60_000,
    commitIntervalMs,
  });

describe('the commit interval of a stream processor', () => {
  it('holds the batches within it uncommitted and unseen downstream, and commits them in one transaction (here at shutdown)', async () => {
    const { h, entry, zoneValues, committed } = await setUp();
    const rt = runtimeOf(
      h,
      createOccupancyProcessor({ venues: new VenueInfos(h.db), inputTopic: h.topics.events, outputTopic: h.derived.occupancy }),
      120_000,
    );
    await rt.start();
    for (let i = 0; i < 6; i++) {
      await entry(i);
      await waitFor(`entry ${i} processed`, async () => rt.stats.messages > i);
    }
    expect(rt.stats.batches).toBeGreaterThanOrEqual(6);
    expect(rt.stats.transactions).toBe(0);
    expect(await committed()).toBe(0);
    expect(await zoneValues()).toEqual([]);

    await rt.stop();
    expect(rt.stats.transactions).toBe(1);
    expect(await committed()).toBe(6);
    expect(await zoneValues()).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('commits on its own once the interval has passed', async () => {
    const { h, entry, zoneValues } = await setUp();
    const rt = runtimeOf(
      h,
      createOccupancyProcessor({ venues: new VenueInfos(h.db), inputTopic: h.topics.events, outputTopic: h.derived.occupancy }),
      300,
    );
    await rt.start();
    try {
      for (let i = 0; i < 3; i++) await entry(i);
      await committedToEnd(h.admin, rt.group, h.topics.events);
      expect(await zoneValues()).toEqual([1, 2, 3]);
    } finally {
      await rt.stop();
    }
  });

  it('after a failed batch, reads the partition again from its last commit, so nothing held before the failure is lost or doubled', async () => {
    const { h, entry, zoneValues, committed } = await setUp();
    const occupancy = createOccupancyProcessor({
      venues: new VenueInfos(h.db),
      inputTopic: h.topics.events,
      outputTopic: h.derived.occupancy,
    });
    let failed = 0;
    // Fails once, on the fourth message, while the first three are processed and held, not committed.
    const flaky: Processor<OccupancyState> = {
      ...occupancy,
      async process(state, messages, ctx) {
        if (failed === 0 && messages.some((m) => m.offset === '3')) {
          failed++;
          throw new Error('a passing failure');
        }
        return occupancy.process(state, messages, ctx);
      },
    };
    const rt = runtimeOf(h, flaky, 120_000);
    await rt.start();
    for (let i = 0; i < 3; i++) await entry(i);
    await waitFor('the first three processed', async () => rt.stats.messages >= 3);
    expect(await committed()).toBe(0);
    for (let i = 3; i < 6; i++) await entry(i);
    await waitFor('the failure and the rereading', async () => failed === 1 && rt.stats.messages >= 9, 30_000);
    await rt.stop();
    expect(await committed()).toBe(6);
    expect(await zoneValues()).toEqual([1, 2, 3, 4, 5, 6]);
  });
});
