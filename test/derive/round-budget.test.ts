import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql, withSettings, type Ch } from '../../clickhouse/client.js';
import { deriveCaughtUp } from '../../clickhouse/queries/derive.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { venueDwell } from '../../domain/analytics/dwell.js';
import { createLogger } from '../../lib/logger.js';
import { startDeriveJob, type RunningDerive } from '../../pipeline/derive/job.js';
import { toRow } from '../../pipeline/sink/rows.js';
import type { Db } from '../../postgres/client.js';
import { testConfig } from '../support/env.js';
import { telemetrySeries } from '../support/telemetry.js';
import { deviceId, event, newVenue } from '../processors/harness.js';
import { DAY, HOUR, MINUTE, oracleDwell, oracleOccupancy, oracleVisits, type DoorEvent, type Sighting } from './oracle.js';
import { scratchDatabase, type ScratchDatabase } from './scratch-database.js';

/**
 * One operator's backfill does not hold back another's figures (docs/processors.md#derived-from-the-raw-table):
 * a round shares its time between operators, runs every operator's newest period, and carries the
 * periods it did not reach over to the next round as marks. With no time at all to share (budget 0),
 * a round does one period per operator: the other operator's new events are in the first round's
 * figures, the backfill's days arrive newest first, one a round, and end equal to the oracle.
 */
const TZ = 'UTC';
const RESET = 4;
const cfg = testConfig();
let scratch: ScratchDatabase;
let admin: Ch;
let ch: Ch;
let db: Db;
let job: RunningDerive;

beforeAll(async () => {
  scratch = await scratchDatabase('budget');
  ({ admin, ch, db } = scratch);
  // Its statements logged (query_log), to check the settings they run with.
  const logged = withSettings(ch, { log_queries: 1 });
  job = startDeriveJob({ ch: logged, db, log: createLogger('derive-budget', cfg.LOG_LEVEL), intervalMs: 3_600_000, roundBudgetMs: 0 });
}, 60_000);

afterAll(async () => {
  await job?.stop();
  await scratch?.close();
});

type Venue = Awaited<ReturnType<typeof newVenue>>;

/** Two devices' visits and a door's flows, every 40 minutes from `from` for `hours`. */
function traffic(v: Venue, tag: string, from: number, hours: number) {
  const sightings: Sighting[] = [];
  const doors: DoorEvent[] = [];
  const events = [];
  for (let ts = from; ts < from + hours * HOUR; ts += 40 * MINUTE) {
    const device = deviceId(`${tag}-${Math.floor(ts / (40 * MINUTE)) % 2}`);
    for (const t of [ts, ts + 4 * MINUTE]) {
      sightings.push({ ts: t, device, zone: null, left: false });
      events.push(event({ ...v, ts: t, type: 'device_seen', device }));
    }
    const door = event({ ...v, ts: ts + MINUTE, type: 'entry', zoneId: v.zones.door!, metrics: { entries: 1 } });
    doors.push({ ts: door.ts, id: door.id, kind: 'entry', amount: 1, forVenue: true });
    events.push(door);
  }
  return { sightings, doors, events };
}

const store = (events: ReturnType<typeof event>[]) =>
  insertEvents(
    ch,
    events.map((e, i) => toRow(e, { topic: 'budget', partition: 0, offset: String(i), index: 0 }, { timezone: TZ, retentionDays: 365 })),
  );

const visitDays = async (v: Venue) =>
  (
    await chRows<{ day: string }>(
      ch,
      chsql`SELECT DISTINCT toString(day) AS day FROM derived_visits WHERE venue_id = toUUID(${v.venueId}) ORDER BY day`,
    )
  ).map((r) => r.day);

async function figures(v: Venue, from: number, now: number) {
  const deps = { db, ch };
  const dwell = await venueDwell(deps, v.operatorId, { id: v.venueId, range: '7d' }, now);
  const series = await telemetrySeries(deps, v.operatorId, v.venueId, {
    keys: ['occupancy'],
    startTs: from - HOUR,
    endTs: now,
    interval: HOUR,
    agg: 'MAX',
    fill: 'none',
  });
  return { dwell: dwell.zones[0]!.buckets.map((b) => b.count), occupancy: series.occupancy!.map((p) => [p.ts, p.value]) };
}

function expected(t: ReturnType<typeof traffic>, from: number, now: number) {
  const maxByHour = new Map<number, number>();
  for (const p of oracleOccupancy(t.doors, RESET, TZ).filter((x) => x.ts >= from - HOUR)) {
    const h = Math.floor(p.ts / HOUR) * HOUR;
    maxByHour.set(h, Math.max(maxByHour.get(h) ?? 0, p.value));
  }
  return {
    dwell: oracleDwell(oracleVisits(t.sightings, RESET, TZ), now, 7).get('')!,
    occupancy: [...maxByHour].sort((a, b) => a[0] - b[0]),
  };
}

describe('a derive round with its time spent', () => {
  it("keeps another operator's figures current while a backfill's days carry over, newest first", async () => {
    await job.runOnce(); // the first round (no cursor yet) of an empty database
    const now = Date.now();
    // The other operator's traffic: two hours, then one more, inside the period before the current one.
    const liveFrom = Math.floor((now - RESET * HOUR) / DAY) * DAY + RESET * HOUR - DAY + 8 * HOUR;
    const zones = [{ slug: 'door', type: 'entrance' }];
    const [big, small] = [
      await newVenue(db, { timezone: TZ, resetHour: RESET, zones }),
      await newVenue(db, { timezone: TZ, resetHour: RESET, zones }),
    ];
    const backfillFrom = Math.floor((now - 5 * DAY) / DAY) * DAY + 6 * HOUR;
    const backfill = traffic(big, 'big', backfillFrom, 5 * 24 - 8);
    const live = traffic(small, 'small', liveFrom, 2);
    await store([...backfill.events, ...live.events]);
    const bigDays = new Set(backfill.sightings.map((s) => new Date(s.ts - RESET * HOUR).toISOString().slice(0, 10)));
    expect(bigDays.size).toBeGreaterThanOrEqual(5);

    const rounds = job.stats.rounds;
    await job.runOnce();
    expect(job.stats.failures).toBe(0);
    expect(job.stats.backlogPeriods).toBe(bigDays.size - 1);
    expect(await deriveCaughtUp(ch, 'derive', 0)).toBe(false);
    expect(await figures(small, liveFrom, now)).toEqual(expected(live, liveFrom, now));
    const newest = [...bigDays].sort().at(-1)!;
    expect(await visitDays(big)).toEqual([newest]);

    // One more day of the backfill each round, newest first; the live venue's new events still come first.
    const seenDays = [newest];
    const more = traffic(small, 'small-2', liveFrom + 2 * HOUR, 1);
    await store(more.events);
    for (let i = 1; i < bigDays.size; i++) {
      await job.runOnce();
      expect(job.stats.backlogPeriods).toBe(bigDays.size - 1 - i);
      if (i === 1)
        expect(await figures(small, liveFrom, now)).toEqual(
          expected({ sightings: [...live.sightings, ...more.sightings], doors: [...live.doors, ...more.doors], events: [] }, liveFrom, now),
        );
      const days = await visitDays(big);
      const added = days.filter((d) => !seenDays.includes(d));
      expect(added).toHaveLength(1);
      expect(added[0]! < seenDays.at(-1)!).toBe(true);
      seenDays.push(added[0]!);
    }
    expect(job.stats.rounds - rounds).toBe(bigDays.size);
    expect(job.stats.failures).toBe(0);
    expect(await figures(big, backfillFrom, now)).toEqual(expected(backfill, backfillFrom, now));
    // Caught up once a round in a later second than the last carrying one leaves nothing over.
    await new Promise((r) => setTimeout(r, 1_100));
    await job.runOnce();
    expect(await deriveCaughtUp(ch, 'derive', 0)).toBe(true);

    // A background job: every statement after the api's reads and on one thread (query-limits.ts).
    await admin.command({ query: 'SYSTEM FLUSH LOGS' });
    // query_log lists only settings that differ from the server's: on a one-core server max_threads is 1 already.
    const [{ value: serverThreads }] = (await chRows<{ value: string }>(
      admin,
      chsql`SELECT value FROM system.settings WHERE name = 'max_threads'`,
    )) as [{ value: string }];
    const [statements] = await chRows<{ n: string; limited: string }>(
      admin,
      chsql`SELECT toString(count()) AS n,
                   toString(countIf((Settings.Values[indexOf(Settings.Names, 'max_threads')] = '1'
                                     OR (indexOf(Settings.Names, 'max_threads') = 0 AND ${serverThreads} = '1'))
                                    AND Settings.Values[indexOf(Settings.Names, 'priority')] = '3')) AS limited
              FROM system.query_log
             WHERE type = 2 AND event_date >= yesterday() AND has(Settings.Names, 'log_queries')
               AND query LIKE '%derived_visits%' AND event_time >= toDateTime(${Math.floor(now / 1000) - 60}, 'UTC')`,
    );
    expect(Number(statements!.n)).toBeGreaterThan(10);
    expect(statements!.limited).toBe(statements!.n);
  }, 120_000);

  it("stops between venue periods, carrying the round's others over to the next leader, which ends equal to the oracle", async () => {
    await job.stop();
    const now = Date.now();
    const v = await newVenue(db, { timezone: TZ, resetHour: RESET, zones: [{ slug: 'door', type: 'entrance' }] });
    const from = Math.floor((now - 4 * DAY) / DAY) * DAY + 6 * HOUR;
    const backfill = traffic(v, 'stopped', from, 4 * 24 - 8);
    await store(backfill.events);
    const days = new Set(backfill.sightings.map((s) => new Date(s.ts - RESET * HOUR).toISOString().slice(0, 10))).size;
    const log = createLogger('derive-stop', cfg.LOG_LEVEL);

    // Stopped while its round starts: at most the period in hand is recomputed, the others are marked again.
    const stopped = startDeriveJob({ ch, db, log, intervalMs: 3_600_000 });
    const round = stopped.runOnce();
    await stopped.stop();
    await round;
    expect(stopped.stats.failures).toBe(0);
    expect(stopped.stats.periods).toBeLessThanOrEqual(1);
    expect(stopped.stats.carriedPeriods).toBeGreaterThanOrEqual(days - 1);

    const next = startDeriveJob({ ch, db, log, intervalMs: 3_600_000 });
    try {
      await next.runOnce();
      // The stopped leader gave the lock back as it stopped, not when Postgres noticed its connection gone.
      expect(next.stats.leading).toBe(true);
      expect(next.stats.failures).toBe(0);
      expect(next.stats.backlogPeriods).toBe(0);
      expect(await figures(v, from, now)).toEqual(expected(backfill, from, now));
    } finally {
      await next.stop();
    }
  }, 60_000);
});
