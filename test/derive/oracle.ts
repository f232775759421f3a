/**
 * An independent recomputation of the derived figures from a venue's events, written from
 * docs/processors.md (not from the production code): the property tests compare the service's
 * answers with it.
 */

export const MINUTE = 60_000;
export const HOUR = 3_600_000;
export const DAY = 86_400_000;
const GAP = 15 * MINUTE;
const MIN_DWELL = 2 * MINUTE;

export interface Sighting {
  ts: number;
  device: string;
  /** The zone of the sighting (null: none). */
  zone: string | null;
  left: boolean;
}

export interface DoorEvent {
  ts: number;
  id: string;
  kind: 'entry' | 'exit' | 'count';
  amount: number;
  /** Counts for the whole venue (no zone, or an entrance/exit zone). */
  forVenue: boolean;
}

const parts = (ts: number, timeZone: string) => {
  const p = Object.fromEntries(
    new Intl.DateTimeFormat('en-CA', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      weekday: 'short',
    })
      .formatToParts(new Date(ts))
      .map((x) => [x.type, x.value]),
  );
  return {
    date: `${p.year}-${p.month}-${p.day}`,
    hour: Number(p.hour),
    minute: Number(p.minute),
    weekday: ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'].indexOf(p.weekday!),
  };
};

/** The reset instant at or before ts: the first instant the local clock reads resetHour:00 (whole-hour zones, an hour that exists every day). */
export function oraclePeriodStart(ts: number, resetHour: number, timeZone: string): number {
  for (let c = Math.floor(ts / HOUR) * HOUR; ; c -= HOUR) {
    const here = parts(c, timeZone);
    if (here.hour === resetHour && here.minute === 0 && parts(c - HOUR, timeZone).hour !== resetHour) return c;
  }
}

export function oraclePeriod(ts: number, resetHour: number, timeZone: string): { start: number; end: number; day: string } {
  const start = oraclePeriodStart(ts, resetHour, timeZone);
  let end = start + 22 * HOUR;
  while (oraclePeriodStart(end, resetHour, timeZone) === start) end += HOUR;
  return { start, end, day: parts(start, timeZone).date };
}

export interface OracleVisit {
  zone: string;
  device: string;
  start: number;
  end: number;
  closes: number;
  day: string;
  sightings: number;
}

/** Visits per scope ('' = whole venue) and device, within each period. */
export function oracleVisits(sightings: Sighting[], resetHour: number, timeZone: string): OracleVisit[] {
  const groups = new Map<string, Sighting[]>();
  for (const s of sightings) {
    const p = oraclePeriod(s.ts, resetHour, timeZone);
    for (const zone of s.zone ? ['', s.zone] : ['']) {
      const k = `${p.start}|${zone}|${s.device}`;
      groups.set(k, [...(groups.get(k) ?? []), s]);
    }
  }
  const out: OracleVisit[] = [];
  for (const [k, list] of groups) {
    const [start, zone] = k.split('|');
    const p = oraclePeriod(Number(start), resetHour, timeZone);
    list.sort((a, b) => a.ts - b.ts || Number(a.left) - Number(b.left));
    let run: Sighting[] = [];
    const close = () => {
      if (run.length === 0) return;
      const first = run[0]!;
      const last = run[run.length - 1]!;
      if (run.length >= 2 && last.ts - first.ts >= MIN_DWELL) {
        out.push({
          zone: zone!,
          device: first.device,
          start: first.ts,
          end: last.ts,
          closes: last.left ? last.ts : Math.min(last.ts + GAP, p.end),
          day: p.day,
          sightings: run.length,
        });
      }
      run = [];
    };
    for (const s of list) {
      const prev = run[run.length - 1];
      if (prev && (s.ts - prev.ts > GAP || prev.left)) close();
      run.push(s);
    }
    close();
  }
  return out;
}

const BUCKETS = [300, 900, 1800, 3600];

/** Dwell histogram per scope of ended visits started in (now + 1 − days, now]. */
export function oracleDwell(visits: OracleVisit[], now: number, days: number): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const v of visits) {
    if (v.start < now + 1 - days * DAY || v.start > now || v.closes >= now) continue;
    const seconds = Math.round((v.end - v.start) / 1000);
    const b = BUCKETS.findIndex((x) => seconds < x);
    const counts = out.get(v.zone) ?? [0, 0, 0, 0, 0];
    counts[b === -1 ? 4 : b]!++;
    out.set(v.zone, counts);
  }
  return out;
}

/** Devices per segment by distinct visit days among the last `days` periods' days (today's included). */
export function oracleScoring(visits: OracleVisit[], now: number, days: number, resetHour: number, timeZone: string): number[] {
  const today = oraclePeriod(now, resetHour, timeZone).day;
  const first = new Date(Date.parse(`${today}T00:00:00Z`) - (days - 1) * DAY).toISOString().slice(0, 10);
  const byDevice = new Map<string, Set<string>>();
  for (const v of visits) {
    if (v.zone !== '' || v.day < first || v.day > today) continue;
    byDevice.set(v.device, (byDevice.get(v.device) ?? new Set()).add(v.day));
  }
  const counts = [0, 0, 0, 0];
  for (const d of byDevice.values()) counts[d.size === 1 ? 0 : d.size <= 3 ? 1 : d.size <= 7 ? 2 : 3]!++;
  return counts;
}

/** The whole venue's occupancy points: per period with events, its start at 0, then the count after each instant. */
export function oracleOccupancy(doors: DoorEvent[], resetHour: number, timeZone: string): Array<{ ts: number; value: number }> {
  const byPeriod = new Map<number, DoorEvent[]>();
  for (const d of doors.filter((x) => x.forVenue)) {
    const start = oraclePeriodStart(d.ts, resetHour, timeZone);
    byPeriod.set(start, [...(byPeriod.get(start) ?? []), d]);
  }
  const points = new Map<number, number>();
  for (const [start, list] of byPeriod) {
    // Same instant: counts first, then larger amounts (entries before exits), then id.
    const signed = (d: DoorEvent) => (d.kind === 'exit' ? -d.amount : d.amount);
    list.sort(
      (a, b) =>
        a.ts - b.ts ||
        Number(b.kind === 'count') - Number(a.kind === 'count') ||
        signed(b) - signed(a) ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    );
    points.set(start, 0);
    let n = 0;
    for (const d of list) {
      n = d.kind === 'count' ? d.amount : Math.max(0, n + signed(d));
      points.set(d.ts, n);
    }
  }
  return [...points].map(([ts, value]) => ({ ts, value })).sort((a, b) => a.ts - b.ts);
}

/** Mean of the points per bucket (bucketOf gives a point's bucket). */
export function oracleMeans(
  points: Array<{ ts: number; value: number }>,
  bucketOf: (ts: number) => number | string,
): Map<number | string, number> {
  const sums = new Map<number | string, [number, number]>();
  for (const p of points) {
    const b = bucketOf(p.ts);
    const s = sums.get(b) ?? [0, 0];
    sums.set(b, [s[0] + p.value, s[1] + 1]);
  }
  return new Map([...sums].map(([b, [sum, n]]) => [b, sum / n]));
}

export const localDate = (ts: number, timeZone: string) => parts(ts, timeZone).date;

/** Prediction samples: hours of the 28 days before now's hour on that local weekday and hour (docs/processors.md#predictions). */
export function oraclePrediction(
  points: Array<{ ts: number; value: number }>,
  now: number,
  dayOfWeek: number,
  hour: number,
  resetHour: number,
  timeZone: string,
) {
  const to = Math.floor(now / HOUR) * HOUR;
  const samples: number[] = [];
  for (let t = to - 28 * DAY; t < to; t += HOUR) {
    const inHour = points.filter((p) => p.ts >= t && p.ts < t + HOUR);
    let value: number | undefined;
    if (inHour.length > 0) value = inHour.reduce((a, p) => a + p.value, 0) / inHour.length;
    else {
      const before = points.filter((p) => p.ts < t);
      const last = before[before.length - 1];
      if (last) value = oraclePeriodStart(last.ts, resetHour, timeZone) === oraclePeriodStart(t, resetHour, timeZone) ? last.value : 0;
    }
    const here = parts(t, timeZone);
    if (value !== undefined && here.weekday === dayOfWeek && here.hour === hour) samples.push(value);
  }
  samples.sort((a, b) => a - b);
  const q = (p: number) => {
    if (samples.length === 0) return 0;
    const h = (samples.length - 1) * p;
    const lo = Math.floor(h);
    return samples[lo]! + (h - lo) * (samples[Math.min(lo + 1, samples.length - 1)]! - samples[lo]!);
  };
  const r = (x: number) => Math.round(x * 100) / 100;
  return {
    dayOfWeek,
    hour,
    mean: samples.length ? r(samples.reduce((a, b) => a + b, 0) / samples.length) : 0,
    p25: r(q(0.25)),
    p75: r(q(0.75)),
    p95: r(q(0.95)),
    sampleSize: samples.length,
  };
}

/** A fixed permutation of `items` for `seed` (a linear congruential generator): the same delivery order on every run. */
export function shuffled<T>(items: T[], seed: number): T[] {
  const out = [...items];
  let s = seed >>> 0 || 1;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1_103_515_245 + 12_345) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
