/**
 * bench:derive-occupancy: what a derive round costs for a venue's occupancy history late in a busy
 * day, recomputing the whole period against recomputing from the first changed instant
 * (pipeline/derive/recompute.ts). Venues with a day so far of door events in a scratch database;
 * then rounds that each add a few new door events per venue and recompute, alternating the two
 * ways on the same data. ClickHouse's CPU is read from /proc around each round.
 * See benchmarks/README.md#derive-occupancy-from-the-first-changed-instant-2026-11-27-issue-30.
 */
import { randomUUID } from 'node:crypto';
import { insertEvents, type EventRow } from '../clickhouse/queries/events.js';
import { cliArgs } from '../lib/cli.js';
import type { CanonicalEvent } from '../lib/events/canonical.js';
import { periodAt } from '../pipeline/derive/periods.js';
import type { VenueDeriveContext } from '../pipeline/derive/context.js';
import { recomputeOccupancy } from '../pipeline/derive/recompute.js';
import { toRow } from '../pipeline/sink/rows.js';
import { machine, round, writeResult } from './lib/harness.js';
import { deriveRound, scratchClickhouse } from './lib/scratch.js';

const { values: args } = cliArgs(
  'npm run bench:derive-occupancy --',
  'A derive round of the occupancy history: the whole period against from the first changed instant (benchmarks/README.md).',
  {
    options: {
      venues: { type: 'string', default: '8' },
      hours: { type: 'string', default: '12' },
      'per-hour': { type: 'string', default: '3000' },
      'per-round': { type: 'string', default: '50' },
      rounds: { type: 'string', default: '6' },
    },
  },
);
const VENUES = Number(args.venues);
const HOURS = Number(args.hours);
const PER_HOUR = Number(args['per-hour']);
const PER_ROUND = Number(args['per-round']);
const ROUNDS = Number(args.rounds);
const DB = 'venue_bench_derive';

const scratch = await scratchClickhouse(DB);
const { ch } = scratch;

// A past day (reset at 04:00 UTC), so nothing else writes it.
const dayStart = Date.UTC(2026, 10, 20, 4, 0);
const period = periodAt(dayStart, 4, 'UTC');
const venues: VenueDeriveContext[] = Array.from({ length: VENUES }, () => {
  const area = randomUUID();
  return {
    operatorId: randomUUID(),
    venueId: randomUUID(),
    timezone: 'UTC',
    resetHour: 4,
    retentionDays: 90,
    zones: new Map([[area, 'area']]),
  };
});
const areaOf = (v: VenueDeriveContext) => [...v.zones.keys()][0]!;

let offset = 0;
/** Door events (entries and exits, a tenth at the area zone) of a venue from `fromMs`, `n` of them `stepMs` apart. */
function doorEvents(v: VenueDeriveContext, fromMs: number, n: number, stepMs: number): EventRow[] {
  return Array.from({ length: n }, (_, i) => {
    const entry = i % 2 === 0;
    const e: CanonicalEvent = {
      id: randomUUID(),
      operatorId: v.operatorId,
      venueId: v.venueId,
      zoneId: i % 10 === 0 ? areaOf(v) : null,
      connectorType: 'density',
      type: entry ? 'entry' : 'exit',
      ts: fromMs + i * stepMs,
      receivedAt: fromMs + i * stepMs + 500,
      device: null,
      randomizedMac: false,
      metrics: entry ? { entries: 1 + (i % 3) } : { exits: 1 + (i % 2) },
      payload: {},
    };
    return toRow(e, { topic: 'bench.derive', partition: 0, offset: String(offset++), index: 0 }, { timezone: 'UTC', retentionDays: 90 });
  });
}

const dayRows = venues.flatMap((v) => doorEvents(v, dayStart, HOURS * PER_HOUR, Math.floor(3_600_000 / PER_HOUR)));
for (let i = 0; i < dayRows.length; i += 100_000) await insertEvents(ch, dayRows.slice(i, i + 100_000));
await deriveRound(ch, venues, (v, out) => recomputeOccupancy(ch, v, period, out));
console.log(
  `bench:derive-occupancy  ${VENUES} venues, ${HOURS} h of ${PER_HOUR} door events an hour each; rounds of ${PER_ROUND} new events a venue`,
);

type Mode = 'whole period' | 'from the first changed instant';
const results: Record<Mode, Array<{ wallMs: number; clickhouseCpuMs: number; nodeCpuMs: number }>> = {
  'whole period': [],
  'from the first changed instant': [],
};
let now = dayStart + HOURS * 3_600_000;
for (let r = 0; r < ROUNDS * 2; r++) {
  const mode: Mode = r % 2 === 0 ? 'whole period' : 'from the first changed instant';
  await insertEvents(
    ch,
    venues.flatMap((v) => doorEvents(v, now, PER_ROUND, 100)),
  );
  const seenFrom = now;
  now += 60_000;
  const ch0 = scratch.clickhouseCpu();
  const node0 = process.cpuUsage();
  const t0 = performance.now();
  await deriveRound(ch, venues, (v, out) => recomputeOccupancy(ch, v, period, out, mode === 'whole period' ? period.start : seenFrom));
  const node = process.cpuUsage(node0);
  results[mode].push({
    wallMs: performance.now() - t0,
    clickhouseCpuMs: (scratch.clickhouseCpu() - ch0) * 1000,
    nodeCpuMs: (node.user + node.system) / 1000,
  });
}

const summary = Object.fromEntries(
  Object.entries(results).map(([mode, runs]) => {
    const mean = (k: keyof (typeof runs)[number]) => round(runs.reduce((a, x) => a + x[k], 0) / runs.length / VENUES, 2);
    return [
      mode,
      { perVenueRound: { wallMs: mean('wallMs'), clickhouseCpuMs: mean('clickhouseCpuMs'), nodeCpuMs: mean('nodeCpuMs') }, runs },
    ];
  }),
);
for (const [mode, s] of Object.entries(summary)) {
  const p = s.perVenueRound;
  console.log(
    `${mode}: per venue and round ${p.wallMs} ms wall, ClickHouse ${p.clickhouseCpuMs} ms CPU, this process ${p.nodeCpuMs} ms CPU`,
  );
}
const file = writeResult('derive-occupancy', {
  benchmark: 'derive-occupancy',
  at: new Date().toISOString(),
  machine: machine(),
  settings: { venues: VENUES, hours: HOURS, perHour: PER_HOUR, perRound: PER_ROUND, rounds: ROUNDS },
  results: summary,
});
console.log(`written to ${file}`);
await scratch.close();
