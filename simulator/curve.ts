import type { Random } from './random.js';

/**
 * The daily curve of arrivals in a venue's local time. Each venue kind opens and closes at fixed
 * local hours (closed at night), and its arrivals follow a base level plus peaks: lunch and
 * evening everywhere, with weights that suit the kind (a café's morning, a bar's evening).
 */

export type Profile = 'retail' | 'foodhall' | 'cafe' | 'bar';

export interface CurveSpec {
  /** Opening and closing, minutes after local midnight; everyone has left at closing. */
  open: number;
  close: number;
  /** Arrivals stop this many minutes before closing. */
  lastEntry: number;
  base: number;
  peaks: ReadonlyArray<{ at: number; width: number; weight: number }>;
  /** Visitor volume per weekday, Sunday first. */
  weekday: readonly number[];
}

const h = (hours: number) => hours * 60;

export const CURVES: Record<Profile, CurveSpec> = {
  retail: {
    open: h(10),
    close: h(20),
    lastEntry: 20,
    base: 0.25,
    peaks: [
      { at: h(12.75), width: 55, weight: 1 },
      { at: h(17.5), width: 75, weight: 1.2 },
    ],
    weekday: [0.35, 0.85, 0.85, 0.9, 1, 1.15, 1.45],
  },
  foodhall: {
    open: h(7),
    close: h(22),
    lastEntry: 30,
    base: 0.12,
    peaks: [
      { at: h(8.25), width: 35, weight: 0.35 },
      { at: h(12.5), width: 45, weight: 1.4 },
      { at: h(19), width: 70, weight: 1 },
    ],
    weekday: [0.8, 0.95, 1, 1, 1.05, 1.2, 1.1],
  },
  cafe: {
    open: h(7),
    close: h(21),
    lastEntry: 30,
    base: 0.2,
    peaks: [
      { at: h(8.5), width: 45, weight: 0.8 },
      { at: h(12.5), width: 50, weight: 1 },
      { at: h(18), width: 60, weight: 0.6 },
    ],
    weekday: [0.9, 1, 1, 1, 1, 1.1, 1.2],
  },
  bar: {
    open: h(12),
    close: h(23.5),
    lastEntry: 45,
    base: 0.1,
    peaks: [
      { at: h(13), width: 50, weight: 0.45 },
      { at: h(20.5), width: 100, weight: 1.3 },
    ],
    weekday: [0.6, 0.55, 0.65, 0.8, 1, 1.45, 1.5],
  },
};

/** Relative arrival rate at a local minute (0 when arrivals are closed). */
export function intensity(spec: CurveSpec, minute: number): number {
  if (minute < spec.open || minute >= spec.close - spec.lastEntry) return 0;
  let v = spec.base;
  for (const p of spec.peaks) v += p.weight * Math.exp(-0.5 * ((minute - p.at) / p.width) ** 2);
  return v;
}

const SLOT = 5;

/** Arrival minutes drawn from the curve (inverse CDF over 5-minute slots), in ascending order. */
export function arrivalMinutes(spec: CurveSpec, count: number, rng: Random): number[] {
  const cumulative: number[] = [];
  let total = 0;
  for (let m = 0; m < 24 * 60; m += SLOT) {
    total += intensity(spec, m + SLOT / 2);
    cumulative.push(total);
  }
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const r = rng.next() * total;
    let lo = 0;
    let hi = cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! > r) hi = mid;
      else lo = mid + 1;
    }
    out.push(lo * SLOT + rng.next() * SLOT);
  }
  return out.sort((a, b) => a - b);
}
