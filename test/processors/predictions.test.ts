import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertDerivedOccupancy, type DerivedOccupancyRow } from '../../clickhouse/queries/derive.js';
import { predictOccupancy, predictOccupancyWeek } from '../../domain/analytics/predictions.js';
import { newVenue, openProcHarness, type ProcHarness } from './harness.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const WEEK = 7 * DAY;

let h: ProcHarness;
let utc: Awaited<ReturnType<typeof newVenue>>;
let ny: Awaited<ReturnType<typeof newVenue>>;
let quiet: Awaited<ReturnType<typeof newVenue>>;
const now = Date.now();
/** An hour two days ago: it and the same hour 1, 2 and 3 weeks earlier are the 4 samples of its weekday and hour. */
const t0 = Math.floor((now - 2 * DAY) / HOUR) * HOUR;

function row(v: { operatorId: string; venueId: string }, ts: number, value: number): DerivedOccupancyRow {
  return {
    operator_id: v.operatorId,
    venue_id: v.venueId,
    ts: Math.floor(ts / 1000),
    ts_ms: ts % 1000,
    local_day: new Date(ts).toISOString().slice(0, 10),
    value,
    retention_days: 365,
    live: 1,
    version: 1,
  };
}

/** Generated history for New York: an update at :10 of every hour of 30 days but every fifth, value from the UTC hour. */
const nyValue = (hourStart: number) => ((hourStart / HOUR) * 37) % 101;
const nyHasUpdate = (hourStart: number) => (hourStart / HOUR) % 5 !== 0;

beforeAll(async () => {
  h = await openProcHarness();
  // Its daily reset half a day away from the sampled hour, so the figure holds on into the next hour.
  utc = await newVenue(h.db, { resetHour: (new Date(t0).getUTCHours() + 12) % 24 });
  ny = await newVenue(h.db, { timezone: 'America/New_York' });
  quiet = await newVenue(h.db);
  const rows: DerivedOccupancyRow[] = [];
  // UTC: 10, 20, 30 in the three earlier weeks; two updates (40 and 60, mean 50) in the latest.
  [30, 20, 10].forEach((v, i) => rows.push(row(utc, t0 - (i + 1) * WEEK + 15 * MINUTE, v)));
  rows.push(row(utc, t0 + 5 * MINUTE, 40), row(utc, t0 + 45 * MINUTE, 60));
  const end = Math.floor(now / HOUR) * HOUR;
  for (let t = end - 30 * DAY; t < end; t += HOUR) if (nyHasUpdate(t)) rows.push(row(ny, t + 10 * MINUTE, nyValue(t)));
  await insertDerivedOccupancy(h.ch, rows);
});

afterAll(async () => {
  await h.close();
});

/** Type-7 percentile, written out for the check. */
function p(sorted: number[], q: number): number {
  const i = (sorted.length - 1) * q;
  const lo = Math.floor(i);
  return sorted[lo]! + (i - lo) * ((sorted[lo + 1] ?? sorted[lo]!) - sorted[lo]!);
}
const r2 = (x: number) => Math.round(x * 100) / 100;

describe('occupancy predictions', () => {
  it('match a hand computation over the four samples of a weekday and hour', async () => {
    const dayOfWeek = new Date(t0).getUTCDay();
    const hour = new Date(t0).getUTCHours();
    const got = await predictOccupancy(h, utc.operatorId, { id: utc.venueId, dayOfWeek: String(dayOfWeek), hour: String(hour) });
    // Samples 10, 20, 30, 50: mean 27.5; p25 = 10 + 0.75 × 10; p75 = 30 + 0.25 × 20; p95 = 30 + 0.85 × 20.
    expect(got).toEqual({ dayOfWeek, hour, mean: 27.5, p25: 17.5, p75: 35, p95: 47, sampleSize: 4 });
    // The hour after has no updates: each week's last figure holds on into it (10, 20, 30 and 60, not the mean 50).
    const next = new Date(t0 + HOUR);
    expect(
      await predictOccupancy(h, utc.operatorId, { id: utc.venueId, dayOfWeek: next.getUTCDay(), hour: next.getUTCHours() }),
    ).toMatchObject({
      mean: 30,
      sampleSize: 4,
    });
  });

  it('use venue-local weekdays and hours, DST included, over the last 28 days; an hour without figures holds the last one until the daily reset, then 0', async () => {
    const local = new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', weekday: 'short', hour: 'numeric', hourCycle: 'h23' });
    const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
    const end = Math.floor(now / HOUR) * HOUR;
    for (const [dayOfWeek, hour] of [
      [0, 1],
      [3, 12],
      [6, 23],
    ] as const) {
      const samples: number[] = [];
      let last: number | undefined;
      for (let t = end - 30 * DAY; t < end; t += HOUR) {
        const parts = Object.fromEntries(local.formatToParts(t).map((x) => [x.type, x.value]));
        // The venue resets at 04:00 local: an hour starting then without a figure of its own reads 0.
        if (nyHasUpdate(t)) last = nyValue(t);
        else if (Number(parts.hour) === 4 && last !== undefined) last = 0;
        if (t < end - 28 * DAY) continue;
        if (days.indexOf(parts.weekday!) === dayOfWeek && Number(parts.hour) === hour) samples.push(last!);
      }
      samples.sort((a, b) => a - b);
      const want = {
        dayOfWeek,
        hour,
        mean: r2(samples.reduce((a, b) => a + b, 0) / samples.length),
        p25: r2(p(samples, 0.25)),
        p75: r2(p(samples, 0.75)),
        p95: r2(p(samples, 0.95)),
        sampleSize: samples.length,
      };
      expect(samples.length).toBeGreaterThanOrEqual(4);
      expect(await predictOccupancy(h, ny.operatorId, { id: ny.venueId, dayOfWeek, hour })).toEqual(want);
    }
  });

  it('answer zeros with sampleSize 0 without history', async () => {
    expect(await predictOccupancy(h, quiet.operatorId, { id: quiet.venueId, dayOfWeek: 2, hour: 9 })).toEqual({
      dayOfWeek: 2,
      hour: 9,
      mean: 0,
      p25: 0,
      p75: 0,
      p95: 0,
      sampleSize: 0,
    });
  });

  it('require both parameters in range (400), and refuse another operator (403)', async () => {
    for (const bad of [
      {},
      { dayOfWeek: 7, hour: 1 },
      { dayOfWeek: 1, hour: 24 },
      { dayOfWeek: '-1', hour: '3' },
      { dayOfWeek: '1e0', hour: '3' },
      { dayOfWeek: 1 },
    ]) {
      await expect(predictOccupancy(h, utc.operatorId, { id: utc.venueId, ...bad } as never)).rejects.toMatchObject({
        status: 400,
        code: 'VALIDATION_ERROR',
      });
    }
    await expect(predictOccupancy(h, utc.operatorId, { id: utc.venueId, hour: '3' } as never)).rejects.toMatchObject({
      details: [{ field: 'dayOfWeek', message: 'is required' }],
    });
    await expect(predictOccupancy(h, quiet.operatorId, { id: utc.venueId, dayOfWeek: 1, hour: 1 })).rejects.toMatchObject({
      status: 403,
      code: 'FORBIDDEN',
    });
  });

  it('for the whole week in one read: every cell as the single-hour answer gives it, venue-local, Sunday 0:00 first', async () => {
    const at = Date.now();
    const week = await predictOccupancyWeek(h, ny.operatorId, { id: ny.venueId }, at);
    expect(week.venue_id).toBe(ny.venueId);
    expect(week.timezone).toBe('America/New_York');
    expect(week.cells).toHaveLength(168);
    expect(week.cells.slice(0, 2).map((c) => [c.dayOfWeek, c.hour])).toEqual([
      [0, 0],
      [0, 1],
    ]);
    expect(week.cells.filter((c) => c.sampleSize > 0).length).toBeGreaterThan(150);
    for (const [dayOfWeek, hour] of [
      [0, 0],
      [3, 14],
      [6, 23],
      [2, 9],
    ] as const) {
      expect(week.cells[dayOfWeek * 24 + hour]).toEqual(await predictOccupancy(h, ny.operatorId, { id: ny.venueId, dayOfWeek, hour }, at));
    }
    expect(
      (await predictOccupancyWeek(h, quiet.operatorId, { id: quiet.venueId })).cells.every((c) => c.sampleSize === 0 && c.mean === 0),
    ).toBe(true);
    await expect(predictOccupancyWeek(h, quiet.operatorId, { id: ny.venueId })).rejects.toMatchObject({ status: 403, code: 'FORBIDDEN' });
  });
});
