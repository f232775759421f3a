import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Ch } from '../../clickhouse/client.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { createLogger } from '../../lib/logger.js';
import { startDeriveJob, type RunningDerive } from '../../pipeline/derive/job.js';
import { startDeriveThread } from '../../pipeline/derive/thread.js';
import { toRow } from '../../pipeline/sink/rows.js';
import type { Db } from '../../postgres/client.js';
import { testConfig } from '../support/env.js';
import { waitFor } from '../pipeline/harness.js';
import { deviceId, event, newVenue } from '../processors/harness.js';
import { MINUTE, oracleOccupancy, oracleVisits, type DoorEvent, type Sighting } from './oracle.js';
import { scratchDatabase, storedFigures, type ScratchDatabase } from './scratch-database.js';

/**
 * The pipeline runs the derive job in a thread of its own (pipeline/derive/thread.ts), so its
 * rounds do not hold up the consumers' event loop. Through the thread the figures are the job's,
 * its counts reach the pipeline's metrics, and it leads and lets go like the job it runs.
 */
const TZ = 'UTC';
const log = createLogger('derive-thread', testConfig().LOG_LEVEL);
let scratch: ScratchDatabase;
let ch: Ch;
let db: Db;
let thread: RunningDerive | undefined;
let other: RunningDerive | undefined;

beforeAll(async () => {
  scratch = await scratchDatabase('thread');
  ({ ch, db } = scratch);
}, 60_000);

afterAll(async () => {
  await thread?.stop();
  await other?.stop();
  await scratch?.close();
});

describe('the derive job in its own thread', () => {
  it('derives the figures, reports its counts to the pipeline, and frees the lead once stopped', async () => {
    // Rounds only when asked: a scheduled one would race the assertions on the counts.
    thread = startDeriveThread(testConfig({ CLICKHOUSE_DATABASE: scratch.database, DERIVE_INTERVAL_MS: '600000' }), log);
    const now = Date.now();
    const resetHour = (new Date(now).getUTCHours() + 12) % 24;
    const from = now - 30 * MINUTE;
    const v = await newVenue(db, { timezone: TZ, resetHour, zones: [{ slug: 'door', type: 'entrance' }] });
    const sightings: Sighting[] = [];
    const doors: DoorEvent[] = [];
    const events: CanonicalEvent[] = [];
    for (const [i, device] of [deviceId('thread-a'), deviceId('thread-b')].entries())
      for (let t = from + i * MINUTE; t < from + 20 * MINUTE; t += 2 * MINUTE) {
        sightings.push({ ts: t, device, zone: null, left: false });
        events.push(event({ ...v, ts: t, type: 'device_seen', device }));
      }
    for (let d = 0; d < 3; d++) {
      const door = event({ ...v, ts: from + d * MINUTE, type: 'entry', zoneId: v.zones.door!, metrics: { entries: 1 } });
      doors.push({ ts: door.ts, id: door.id, kind: 'entry', amount: 1, forVenue: true });
      events.push(door);
    }
    await insertEvents(
      ch,
      events.map((e, i) => toRow(e, { topic: 'thread', partition: 0, offset: String(i), index: 0 }, { timezone: TZ, retentionDays: 365 })),
    );

    await thread.runOnce();
    expect(thread.stats).toMatchObject({ leading: true, failures: 0, visitPeriods: 1, occupancyPeriods: 1 });
    expect(thread.stats.rounds).toBeGreaterThanOrEqual(1);
    expect(thread.stats.rowsWritten).toBeGreaterThan(0);
    expect((await storedFigures(ch)).get(v.venueId)).toEqual({
      visits: oracleVisits(sightings, resetHour, TZ).length,
      occupancy: oracleOccupancy(doors, resetHour, TZ).at(-1)!.value,
    });

    // A job elsewhere (another pipeline process) stands by while the thread leads.
    other = startDeriveJob({ ch, db, log, intervalMs: 600_000 });
    await other.runOnce();
    expect(other.stats.leading).toBe(false);

    // Stopped, the thread gives up the lead: the other job takes over at its next round.
    await thread.stop();
    expect(thread.stats.leading).toBe(false);
    thread = undefined;
    await other.runOnce();
    expect(other.stats).toMatchObject({ leading: true, failures: 0 });
  }, 120_000);

  it('starts a thread that ended by itself again, counting each end as a failed round, until stopped', async () => {
    // A configuration the thread cannot start with (the process's own was checked before): it throws at once.
    const broken = startDeriveThread({ ...testConfig(), CLICKHOUSE_URL: 'no url' }, log, { restartMs: 200 });
    try {
      await waitFor('two ends, the second after a restart', async () => broken.stats.failures >= 2, 30_000);
      expect(broken.stats.leading).toBe(false);
      // A round asked of a thread that ends is not waited on for ever.
      await broken.runOnce();
    } finally {
      await broken.stop();
    }
    const failures = broken.stats.failures;
    await new Promise((r) => setTimeout(r, 1_000));
    expect(broken.stats.failures).toBe(failures);
  }, 60_000);
});
