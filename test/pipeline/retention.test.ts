import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql, raw } from '../../clickhouse/client.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { RETAINED_TABLES } from '../../clickhouse/queries/retention.js';
import { dropExpiredPartitions, isExpired, parsePartitionId } from '../../pipeline/retention.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { event, newTenant, openHarness, type Harness } from './harness.js';

const DAY = 86_400_000;

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

describe('partition ids', () => {
  it('read as (retention class, end of the day or month they cover)', () => {
    expect(parsePartitionId('7-20240102')).toEqual({ retentionDays: 7, endMs: Date.UTC(2024, 0, 3) });
    expect(parsePartitionId('365-202412')).toEqual({ retentionDays: 365, endMs: Date.UTC(2025, 0, 1) });
    expect(parsePartitionId('all')).toBeUndefined();
  });

  it('expire once everything in them is older than the window', () => {
    const end = Date.UTC(2024, 0, 3);
    expect(isExpired('events', '7-20240102', end + 7 * DAY - 1)).toBe(false);
    expect(isExpired('events', '7-20240102', end + 7 * DAY)).toBe(true);
    // Local days can end after the UTC day of the same date: one more day for the daily rollup.
    expect(isExpired('telemetry_1d', '7-20240102', end + 7 * DAY)).toBe(false);
    expect(isExpired('telemetry_1d', '7-20240102', end + 8 * DAY)).toBe(true);
    expect(isExpired('telemetry_1h', '1825-202401', Date.UTC(2024, 1, 1) + 1825 * DAY)).toBe(true);
  });
});

describe('the retention job', () => {
  it('drops the partitions past their class window from every table, and nothing else', async () => {
    const now = Date.now();
    const free = await newTenant(h.db, 'free', ['UTC']);
    const pro = await newTenant(h.db, 'pro', ['UTC']);
    const at = (t: { operatorId: string; venueIds: string[] }, ts: number, retentionDays: number, offset: number) =>
      toRow(
        event({ operatorId: t.operatorId, venueId: t.venueIds[0]!, ts, metrics: { temperature: 20 }, device: 'dev-1' }),
        { topic: h.topics.events, partition: 0, offset: String(offset), index: 0 },
        { timezone: 'UTC', retentionDays },
      );
    await insertEvents(h.ch, [at(free, now - 10 * DAY, 7, 0), at(free, now - DAY, 7, 1), at(pro, now - 10 * DAY, 365, 2)]);

    const dropped = await dropExpiredPartitions(h.ch, h.log, now);

    const oldDay = new Date(now - 10 * DAY).toISOString().slice(0, 10).replaceAll('-', '');
    for (const table of RETAINED_TABLES) expect(dropped, table).toContainEqual({ table, partitionId: `7-${oldDay}` });
    expect(dropped.every((d) => d.partitionId.startsWith('7-'))).toBe(true);
    const time: Record<(typeof RETAINED_TABLES)[number], string> = {
      events: 'ts',
      telemetry_1m: 'bucket',
      telemetry_1h: 'bucket',
      telemetry_1d: 'toDateTime(day)',
    };
    const cutoff = Math.floor((now - 5 * DAY) / 1000);
    for (const table of RETAINED_TABLES) {
      const counts = await chRows<{ venue: string; old: number; recent: number }>(
        h.ch,
        chsql`SELECT toString(venue_id) AS venue, toUInt32(countIf(${raw(time[table])} < toDateTime(${cutoff}, 'UTC'))) AS old,
                     toUInt32(countIf(${raw(time[table])} >= toDateTime(${cutoff}, 'UTC'))) AS recent
                FROM ${raw(table)} WHERE has(${[free.venueIds[0]!, pro.venueIds[0]!]}, toString(venue_id))
               GROUP BY venue`,
      );
      const of = (venue: string) => counts.find((c) => c.venue === venue);
      // free (7 days): the 10-day-old rows are gone, the recent ones stay; pro (365 days) keeps its old rows.
      expect(of(free.venueIds[0]!), `${table} free`).toEqual({ venue: free.venueIds[0], old: 0, recent: expect.any(Number) });
      expect(of(free.venueIds[0]!)!.recent, `${table} free`).toBeGreaterThan(0);
      expect(of(pro.venueIds[0]!)!.old, `${table} pro`).toBeGreaterThan(0);
    }
  });
});
