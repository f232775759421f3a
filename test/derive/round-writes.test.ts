import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql, type Ch } from '../../clickhouse/client.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { createLogger } from '../../lib/logger.js';
import { startDeriveJob, type RunningDerive } from '../../pipeline/derive/job.js';
import { toRow } from '../../pipeline/sink/rows.js';
import type { Db } from '../../postgres/client.js';
import { testConfig } from '../support/env.js';
import { deviceId, event, newVenue } from '../processors/harness.js';
import { DAY, HOUR, MINUTE, oracleOccupancy, oracleVisits, type DoorEvent, type Sighting } from './oracle.js';
import { scratchDatabase, storedFigures, type ScratchDatabase } from './scratch-database.js';

/**
 * A derive round writes what all its venue periods changed in one insert per table
 * (pipeline/derive/writes.ts), not one per venue: ClickHouse makes a part of every insert. Each
 * insert into a MergeTree table takes the next block number of the table's partition, which
 * `system.parts` keeps (merges keep the highest), so the inserts a round sent are counted from
 * outside.
 */
const TZ = 'UTC';
const VENUES = 4;
let scratch: ScratchDatabase;
let ch: Ch;
let db: Db;
let job: RunningDerive;

beforeAll(async () => {
  scratch = await scratchDatabase('round_writes');
  ({ ch, db } = scratch);
  job = startDeriveJob({ ch, db, log: createLogger('derive-writes', testConfig().LOG_LEVEL), intervalMs: 3_600_000 });
}, 60_000);

afterAll(async () => {
  await job?.stop();
  await scratch?.close();
});

/** The highest block number each table's parts hold (0 for a table never written). */
async function blocks(): Promise<Record<string, number>> {
  const rows = await chRows<{ table: string; n: string }>(
    ch,
    chsql`SELECT table, toString(max(max_block_number)) AS n FROM system.parts
           WHERE database = ${scratch.database} AND table IN ('derived_visits', 'derived_visit_state', 'derived_occupancy')
           GROUP BY table`,
  );
  const out: Record<string, number> = { derived_visits: 0, derived_visit_state: 0, derived_occupancy: 0 };
  for (const r of rows) out[r.table] = Number(r.n);
  return out;
}

describe('a derive round over several venues', () => {
  it("writes every venue's visits, states and occupancy history in one insert per table", async () => {
    await job.runOnce(); // the first round (no cursor yet) of an empty database
    // Every venue's period is yesterday's UTC day and its events are six hours after its reset, whatever
    // the hour the test runs at: each table's rows land in one partition.
    const resetHour = 0;
    const from = Math.floor(Date.now() / DAY) * DAY - DAY + 6 * HOUR;
    const expected = [];
    const rows = [];
    for (let i = 0; i < VENUES; i++) {
      const v = await newVenue(db, { timezone: TZ, resetHour, zones: [{ slug: 'door', type: 'entrance' }] });
      const sightings: Sighting[] = [];
      const doors: DoorEvent[] = [];
      for (let d = 0; d <= i; d++) {
        const device = deviceId(`writes-${i}-${d}`);
        for (let t = from; t < from + 30 * MINUTE; t += 3 * MINUTE) {
          sightings.push({ ts: t, device, zone: null, left: false });
          rows.push(event({ ...v, ts: t, type: 'device_seen', device }));
        }
        const door = event({ ...v, ts: from + d * MINUTE, type: 'entry', zoneId: v.zones.door!, metrics: { entries: 1 } });
        doors.push({ ts: door.ts, id: door.id, kind: 'entry', amount: 1, forVenue: true });
        rows.push(door);
      }
      expected.push({
        venueId: v.venueId,
        visits: oracleVisits(sightings, resetHour, TZ).length,
        occupancy: oracleOccupancy(doors, resetHour, TZ).at(-1)!.value,
      });
    }
    await insertEvents(
      ch,
      rows.map((e, i) =>
        toRow(e, { topic: 'round-writes', partition: 0, offset: String(i), index: 0 }, { timezone: TZ, retentionDays: 365 }),
      ),
    );

    const before = await blocks();
    await job.runOnce();
    expect(job.stats.failures).toBe(0);
    expect(job.stats.visitPeriods).toBeGreaterThanOrEqual(VENUES);
    const after = await blocks();
    for (const table of Object.keys(before)) expect({ table, inserts: after[table]! - before[table]! }).toEqual({ table, inserts: 1 });

    const got = await storedFigures(ch);
    for (const e of expected) expect({ venueId: e.venueId, ...got.get(e.venueId) }).toEqual(e);
    expect(expected.map((e) => e.visits)).toEqual([1, 2, 3, 4]);
  }, 120_000);
});
