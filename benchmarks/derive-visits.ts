/**
 * bench:derive-visits: what a derive round costs for a venue's visits late in a busy day
 * (pipeline/derive/visits.ts, recomputeVisits). Venues with a day so far of visits (devices
 * arriving all day, staying 10 minutes to 2 hours, seen every 1–4 minutes) in a scratch database;
 * then rounds that each add the next minute's sightings and recompute the visits they mark.
 * Seeded: every run stores the same sightings, so a run of the code before a change (this file
 * copied into a worktree) compares with one after. ClickHouse's CPU is read from /proc around
 * each round. See benchmarks/README.md#derive-visits-from-a-window-2026-11-27-issue-30.
 */
import { randomUUID } from 'node:crypto';
import { insertEvents, type EventRow } from '../clickhouse/queries/events.js';
import { cliArgs } from '../lib/cli.js';
import type { CanonicalEvent } from '../lib/events/canonical.js';
import { periodAt } from '../pipeline/derive/periods.js';
import type { VenueDeriveContext } from '../pipeline/derive/context.js';
import { recomputeVisits } from '../pipeline/derive/visits.js';
import { toRow } from '../pipeline/sink/rows.js';
import { machine, round, writeResult } from './lib/harness.js';
import { deriveRound, scratchClickhouse } from './lib/scratch.js';

const { values: args } = cliArgs(
  'npm run bench:derive-visits --',
  "A derive round of a busy day's visits: ClickHouse and pipeline CPU per venue and round (benchmarks/README.md).",
  {
    options: {
      venues: { type: 'string', default: '8' },
      hours: { type: 'string', default: '12' },
      'arrivals-per-hour': { type: 'string', default: '300' },
      rounds: { type: 'string', default: '8' },
      residents: { type: 'string', default: '0' },
      'resident-every-s': { type: 'string', default: '12' },
      'round-s': { type: 'string', default: '60' },
      out: { type: 'string', default: 'derive-visits' },
    },
  },
);
const VENUES = Number(args.venues);
const HOURS = Number(args.hours);
const ARRIVALS = Number(args['arrivals-per-hour']);
const ROUNDS = Number(args.rounds);
/** Devices present all day (staff, fixed equipment, the soak's recurring devices), each seen every RESIDENT_EVERY. */
const RESIDENTS = Number(args.residents);
const RESIDENT_EVERY = Number(args['resident-every-s']) * 1000;
const ROUND = Number(args['round-s']) * 1000;
const DB = 'venue_bench_visits';
const MINUTE = 60_000;

const scratch = await scratchClickhouse(DB);
const { ch } = scratch;

/** A fixed sequence (xorshift32), so every run generates the same day. */
let seed = 0x2f6b_1d3a;
const random = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 2 ** 32;
};

// A past day (reset at 04:00 UTC), so nothing else writes it.
const dayStart = Date.UTC(2026, 10, 20, 4, 0);
const period = periodAt(dayStart, 4, 'UTC');
const hex = (n: number) => Math.floor(n).toString(16).padStart(8, '0');
const venues: VenueDeriveContext[] = Array.from({ length: VENUES }, (_, i) => ({
  operatorId: `00000000-0000-4000-8000-${hex(i).padStart(12, '0')}`,
  venueId: `00000000-0000-4000-9000-${hex(i).padStart(12, '0')}`,
  timezone: 'UTC',
  resetHour: 4,
  retentionDays: 90,
  zones: new Map(),
}));

/** Every sighting of the day and the rounds after it, per venue, in time order. */
const end = dayStart + HOURS * 3_600_000 + ROUNDS * ROUND;
const sightings = venues.map(() => {
  const out: Array<{ ts: number; device: string }> = [];
  const pool = ARRIVALS * 4;
  for (let arrive = dayStart; arrive < end; arrive += 3_600_000 / ARRIVALS) {
    const stay = (10 + random() * 110) * MINUTE;
    const every = (1 + random() * 3) * MINUTE;
    const device = `bench-device-${hex(random() * pool)}`;
    for (let ts = arrive + random() * MINUTE; ts < Math.min(arrive + stay, end); ts += every) out.push({ ts: Math.floor(ts), device });
  }
  for (let r = 0; r < RESIDENTS; r++) {
    const device = `bench-resident-${hex(r)}`;
    for (let ts = dayStart + random() * RESIDENT_EVERY; ts < end; ts += RESIDENT_EVERY * (0.5 + random()))
      out.push({ ts: Math.floor(ts), device });
  }
  return out.sort((a, b) => a.ts - b.ts);
});

let offset = 0;
function rows(v: VenueDeriveContext, list: Array<{ ts: number; device: string }>): EventRow[] {
  return list.map((s) => {
    const e: CanonicalEvent = {
      id: randomUUID(),
      operatorId: v.operatorId,
      venueId: v.venueId,
      zoneId: null,
      connectorType: 'meraki',
      type: 'device_seen',
      ts: s.ts,
      receivedAt: s.ts + 500,
      device: s.device,
      randomizedMac: false,
      metrics: {},
      payload: {},
    };
    return toRow(e, { topic: 'bench.visits', partition: 0, offset: String(offset++), index: 0 }, { timezone: 'UTC', retentionDays: 90 });
  });
}

let now = dayStart + HOURS * 3_600_000;
// Built and stored a chunk at a time: the whole day's rows at once do not fit the heap.
let daySightings = 0;
for (const [i, v] of venues.entries()) {
  const day = sightings[i]!.filter((s) => s.ts < now);
  daySightings += day.length;
  for (let at = 0; at < day.length; at += 100_000) await insertEvents(ch, rows(v, day.slice(at, at + 100_000)));
}
await deriveRound(ch, venues, (v, out) => recomputeVisits(ch, v, period, period.start, now - 1, out));
console.log(
  `bench:derive-visits  ${VENUES} venues, ${HOURS} h of ${ARRIVALS} arrivals an hour and ${RESIDENTS} residents each (${Math.round(daySightings / VENUES / HOURS)} sightings an hour); rounds of ${ROUND / 1000} s`,
);

const runs: Array<{ sightings: number; wallMs: number; clickhouseCpuMs: number; nodeCpuMs: number }> = [];
for (let r = 0; r < ROUNDS; r++) {
  const batch = venues.map((_, i) => sightings[i]!.filter((s) => s.ts >= now && s.ts < now + ROUND));
  await insertEvents(
    ch,
    venues.flatMap((v, i) => rows(v, batch[i]!)),
  );
  const ch0 = scratch.clickhouseCpu();
  const node0 = process.cpuUsage();
  const t0 = performance.now();
  await deriveRound(ch, venues, (v, out) => recomputeVisits(ch, v, period, now, now + ROUND - 1, out));
  const node = process.cpuUsage(node0);
  runs.push({
    sightings: batch.reduce((n, b) => n + b.length, 0),
    wallMs: performance.now() - t0,
    clickhouseCpuMs: (scratch.clickhouseCpu() - ch0) * 1000,
    nodeCpuMs: (node.user + node.system) / 1000,
  });
  now += ROUND;
}

// The first two rounds warm caches; the rest are the figure.
const measured = runs.slice(2);
const mean = (k: 'wallMs' | 'clickhouseCpuMs' | 'nodeCpuMs') => round(measured.reduce((a, x) => a + x[k], 0) / measured.length / VENUES, 2);
const perVenueRound = { wallMs: mean('wallMs'), clickhouseCpuMs: mean('clickhouseCpuMs'), nodeCpuMs: mean('nodeCpuMs') };
console.log(
  `per venue and round: ${perVenueRound.wallMs} ms wall, ClickHouse ${perVenueRound.clickhouseCpuMs} ms CPU, this process ${perVenueRound.nodeCpuMs} ms CPU`,
);
const file = writeResult(args.out, {
  benchmark: 'derive-visits',
  at: new Date().toISOString(),
  machine: machine(),
  settings: {
    venues: VENUES,
    hours: HOURS,
    arrivalsPerHour: ARRIVALS,
    rounds: ROUNDS,
    residents: RESIDENTS,
    residentEveryS: RESIDENT_EVERY / 1000,
    roundS: ROUND / 1000,
  },
  sightingsPerVenueHour: Math.round(daySightings / VENUES / HOURS),
  perVenueRound,
  runs,
});
console.log(`written to ${file}`);
await scratch.close();
