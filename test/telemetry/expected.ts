import { expect } from 'vitest';
import type { CanonicalEvent } from '../../lib/events/canonical.js';

/**
 * Expected telemetry computed from the events a test sent, independently of the service: its own
 * bucket arithmetic and its own fixed zone rules (not Intl, not ClickHouse).
 */

export const MINUTE = 60_000;
export const HOUR = 3_600_000;
export const DAY = 86_400_000;

export type Agg = 'AVG' | 'MAX' | 'MIN' | 'SUM' | 'COUNT';
export const AGGS: Agg[] = ['AVG', 'MAX', 'MIN', 'SUM', 'COUNT'];

/** A zone as two functions: the local day (days since 1970-01-01) of an instant, and a local day's midnight. */
export interface Zone {
  dayOf(ts: number): number;
  midnight(day: number): number;
}

const fixed = (offsetMs: number): Zone => ({
  dayOf: (ts) => Math.floor((ts + offsetMs) / DAY),
  midnight: (day) => day * DAY - offsetMs,
});

export const UTC = fixed(0);
export const KOLKATA = fixed(5.5 * HOUR);

/** The last Sunday of a month (0-based), as a UTC midnight. */
export function lastSunday(year: number, month: number): number {
  const last = Date.UTC(year, month + 1, 0);
  return last - new Date(last).getUTCDay() * DAY;
}

/** Europe/Berlin: CET (+1), CEST (+2) from the last Sunday of March to the last Sunday of October, switching at 01:00 UTC. */
export const BERLIN: Zone = {
  dayOf(ts) {
    const y = new Date(ts).getUTCFullYear();
    const summer = ts >= lastSunday(y, 2) + HOUR && ts < lastSunday(y, 9) + HOUR;
    return Math.floor((ts + (summer ? 2 : 1) * HOUR) / DAY);
  },
  midnight(day) {
    // Local midnight is CEST on dates after the March switch up to the October switch day itself.
    const date = day * DAY;
    const y = new Date(date).getUTCFullYear();
    const summer = date > lastSunday(y, 2) && date <= lastSunday(y, 9);
    return date - (summer ? 2 : 1) * HOUR;
  },
};

/** The bucket start of an event's source row, or undefined when the row starts outside [start, end). */
export type Bucketer = (ts: number) => number | undefined;

export function epochBucketer(start: number, end: number, interval: number): Bucketer {
  const res = interval % HOUR === 0 ? HOUR : MINUTE;
  return (ts) => {
    const row = Math.floor(ts / res) * res;
    return row >= start && row < end ? Math.floor(ts / interval) * interval : undefined;
  };
}

export function dayBucketer(start: number, end: number, days: number, zone: Zone): Bucketer {
  return (ts) => {
    const day = zone.dayOf(ts);
    const midnight = zone.midnight(day);
    return midnight >= start && midnight < end ? zone.midnight(Math.floor(day / days) * days) : undefined;
  };
}

/** Non-empty buckets of one key, in time order. */
export function expectedSeries(events: CanonicalEvent[], key: string, agg: Agg, bucketOf: Bucketer): Array<{ ts: number; value: number }> {
  const groups = new Map<number, { values: number[]; devices: Set<string> }>();
  for (const e of events) {
    const b = bucketOf(e.ts);
    if (b === undefined) continue;
    const value = e.metrics[key as keyof CanonicalEvent['metrics']];
    if (key === 'devices' ? !e.device : value === undefined) continue;
    const g = groups.get(b) ?? { values: [], devices: new Set<string>() };
    groups.set(b, g);
    if (key === 'devices') g.devices.add(e.device!);
    else g.values.push(value!);
  }
  return [...groups]
    .sort((a, b) => a[0] - b[0])
    .map(([ts, g]) => ({ ts, value: key === 'devices' ? g.devices.size : aggregate(g.values, agg) }));
}

function aggregate(values: number[], agg: Agg): number {
  const sum = values.reduce((a, b) => a + b, 0);
  switch (agg) {
    case 'AVG':
      return sum / values.length;
    case 'SUM':
      return sum;
    case 'MIN':
      return Math.min(...values);
    case 'MAX':
      return Math.max(...values);
    case 'COUNT':
      return values.length;
  }
}

/** Same buckets, same values (floats to 9 significant digits). */
export function expectSeries(
  got: Array<{ ts: number; value: number | null }>,
  want: Array<{ ts: number; value: number }>,
  label: string,
): void {
  expect(
    got.map((p) => p.ts),
    `${label}: bucket starts`,
  ).toEqual(want.map((p) => p.ts));
  got.forEach((p, i) => {
    const w = want[i]!.value;
    expect(typeof p.value, `${label} @${p.ts}`).toBe('number');
    expect(Math.abs(p.value! - w), `${label} @${new Date(p.ts).toISOString()}: ${p.value} vs ${w}`).toBeLessThanOrEqual(
      Math.abs(w) * 1e-9 + 1e-9,
    );
  });
}
