/**
 * bench:derive-round: the derive job's rounds over the data the last bench:ingest run left (Postgres
 * `venue_bench`, ClickHouse `venue_ingest_<run>`), every venue's marks at once, timed two ways on the same data: each venue's marks
 * as one range for both figures (what a round did before the marks carried their kind, migration
 * 0012) and by kind (visits where sightings were marked, the occupancy history where door flows
 * were). The rows written are the same either way; ClickHouse's CPU is read from /proc around each
 * round and the pipeline's from this process. See benchmarks/README.md.
 */
import { createCh } from '../clickhouse/client.js';
import { marksSince } from '../clickhouse/queries/derive.js';
import { cliArgs } from '../lib/cli.js';
import { byVenue, deriveContexts, markedSpan, type VenueMarks } from '../pipeline/derive/marks.js';
import { periodsBetween } from '../pipeline/derive/periods.js';
import { recomputePeriod, type MarkedRanges } from '../pipeline/derive/recompute.js';
import { createDb } from '../postgres/client.js';
import { benchConfig, chDatabasesOf, cpuSecondsOf, enginePids, machine, round, writeResult } from './lib/harness.js';
import { deriveRound } from './lib/scratch.js';

const { values: args } = cliArgs(
  'npm run bench:derive-round --',
  "Derive rounds over the last bench:ingest run's data: one range per venue against ranges by kind (benchmarks/README.md).",
  { options: { rounds: { type: 'string', default: '4' } } },
);
const ROUNDS = Number(args.rounds);

const { cfg: base } = benchConfig({});
const pgUrl = new URL(base.DATABASE_URL);
pgUrl.pathname = '/venue_bench';
const lastRun = (await chDatabasesOf(createCh(base, null), 'venue_ingest')).at(-1);
if (!lastRun) throw new Error('no bench:ingest database in ClickHouse: run npm run bench:ingest first');
const { cfg } = benchConfig({ DATABASE_URL: pgUrl.toString(), CLICKHOUSE_DATABASE: lastRun });
const ch = createCh(cfg, lastRun, { requestTimeoutMs: 600_000 });
const db = createDb(cfg, 2);
const marks = byVenue(await marksSince(ch, 0));
if (marks.length === 0) throw new Error(`no marks in ${lastRun}: run npm run bench:ingest first`);
const contexts = await deriveContexts(db, marks);
const venues = {
  total: marks.length,
  sightingsOnly: marks.filter((m) => !m.ranges.occupancy).length,
  flowsOnly: marks.filter((m) => !m.ranges.visits).length,
};

const MODES = {
  'one range': (m: VenueMarks): MarkedRanges => ({ visits: markedSpan(m.ranges), occupancy: markedSpan(m.ranges) }),
  'by kind': (m: VenueMarks): MarkedRanges => m.ranges,
};
type Mode = keyof typeof MODES;
const clickhouseCpu = () => cpuSecondsOf({ clickhouse: enginePids().clickhouse }).clickhouse!;

async function derive(mode: Mode): Promise<{ clickhouseMs: number; pipelineMs: number; wallMs: number }> {
  const [c0, p0, w0] = [clickhouseCpu(), process.cpuUsage(), Date.now()];
  const work = marks.flatMap((m) => {
    const v = contexts.get(m.venue_id);
    if (!v) return [];
    const ranges = MODES[mode](m);
    return periodsBetween(...markedSpan(ranges), v.resetHour, v.timezone).map((p) => ({ v, p, ranges }));
  });
  await deriveRound(ch, work, ({ v, p, ranges }, out) => recomputePeriod(ch, v, p, ranges, out));
  const p = process.cpuUsage(p0);
  return { clickhouseMs: (clickhouseCpu() - c0) * 1000, pipelineMs: (p.user + p.system) / 1000, wallMs: Date.now() - w0 };
}

console.log(`bench:derive-round  ${venues.total} venues (${venues.sightingsOnly} sightings only, ${venues.flowsOnly} door flows only)`);
// A first round writes whatever the job had not yet: the timed ones then write nothing, both ways.
await derive('by kind');
const runs: Record<Mode, Awaited<ReturnType<typeof derive>>[]> = { 'one range': [], 'by kind': [] };
for (let i = 0; i < ROUNDS; i++) for (const mode of Object.keys(MODES) as Mode[]) runs[mode].push(await derive(mode));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const summary = Object.fromEntries(
  Object.entries(runs).map(([mode, rs]) => {
    const figures = {
      clickhouseMs: round(median(rs.map((r) => r.clickhouseMs))),
      pipelineMs: round(median(rs.map((r) => r.pipelineMs))),
      wallMs: round(median(rs.map((r) => r.wallMs))),
      clickhouseMsEach: rs.map((r) => round(r.clickhouseMs)),
    };
    console.log(
      `${mode.padEnd(10)} per round (median of ${ROUNDS}): ClickHouse ${figures.clickhouseMs} ms, pipeline ${figures.pipelineMs} ms, wall ${figures.wallMs} ms`,
    );
    return [mode, figures];
  }),
);
const file = writeResult('derive-round', {
  benchmark: 'derive-round',
  at: new Date().toISOString(),
  machine: machine(),
  settings: { rounds: ROUNDS, venues },
  results: summary,
});
console.log(`written to ${file}`);
await ch.close();
await db.end();
