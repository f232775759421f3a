/**
 * bench:api-cpu: the api's own CPU per ingested event, without I/O: the work of `POST /ingest` that
 * grows with the events (parse the body, check each event, pseudonymise, build the canonical events
 * and encode the Kafka message), timed in this process on the bodies bench:ingest sends. Alone on
 * one thread, so its figures move far less than the whole stack's, and a change to the hot path
 * shows here first. See benchmarks/README.md#benchapi-cpu.
 */
import { parseArgs } from 'node:util';
import { checkEvents, toCanonical } from '../domain/ingest/ingest.js';
import { Pseudonyms } from '../domain/ingest/pseudonyms.js';
import { PLAN_LIMITS } from '../domain/tenants/plans.js';
import { encodeEventMessages } from '../lib/events.js';
import { ingestBody, randomMac, type BenchVenue } from './lib/requests.js';
import { machine, percentile, round, writeResult } from './lib/harness.js';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '400' },
    batch: { type: 'string', default: '1000' },
    'new-devices': { type: 'string', default: '0.1' },
    out: { type: 'string', default: 'api-cpu' },
  },
});
const REQUESTS = Number(args.requests);
const BATCH = Number(args.batch);
const NEW_DEVICES = Number(args['new-devices']);

const pseudonyms = new Pseudonyms('bench-api-cpu-pseudonym-secret-0123456789');
const operatorId = '7d8f3c4e-9b1a-4f2e-8c3d-5a6b7c8d9e0f';
const limits = PLAN_LIMITS.pro;
const venues: BenchVenue[] = [
  { venueId: '2b1c0d9e-8f7a-4b6c-9d5e-4f3a2b1c0d9e', connector: 'meraki', pool: Array.from({ length: 2000 }, randomMac) },
  { venueId: '3c2d1e0f-9a8b-4c7d-8e6f-5a4b3c2d1e0f', connector: 'density', pool: [] },
];

type Stage = 'parse' | 'check' | 'canonical' | 'encode';
const STAGES: Stage[] = ['parse', 'check', 'canonical', 'encode'];

/** One request's work, stage by stage, in ms. */
function handle(body: string, v: BenchVenue): Record<Stage, number> {
  const t0 = performance.now();
  const parsed = JSON.parse(body) as { events: unknown[] };
  const t1 = performance.now();
  const now = Date.now();
  const { valid, errors } = checkEvents(parsed.events, v.connector, now, { days: limits.retentionDays, plan: limits.label });
  if (errors.length > 0) throw new Error(`the bench's own events were refused: ${errors[0]!.reason}`);
  const t2 = performance.now();
  const ctx = { key: pseudonyms.keyFor(operatorId), operatorId, venueId: v.venueId, connectorType: v.connector, receivedAt: now };
  const canonical = valid.map((e) => toCanonical(e, ctx));
  const t3 = performance.now();
  const messages = encodeEventMessages(canonical);
  if (messages.length === 0) throw new Error('nothing encoded');
  const t4 = performance.now();
  return { parse: t1 - t0, check: t2 - t1, canonical: t3 - t2, encode: t4 - t3 };
}

console.log(`bench:api-cpu  ${REQUESTS} requests of ${BATCH} events per connector, ${NEW_DEVICES * 100} % new devices`);
const results: Record<string, unknown> = {};
for (const v of venues) {
  // Bodies built ahead, so building them is not timed; a fresh set per pass keeps the timestamps recent.
  const bodies = Array.from({ length: REQUESTS }, () => ingestBody(v, BATCH, NEW_DEVICES));
  for (let i = 0; i < Math.min(50, REQUESTS); i++) handle(bodies[i]!, v); // warm-up: JIT and caches
  const perStage: Record<Stage, number[]> = { parse: [], check: [], canonical: [], encode: [] };
  const totals: number[] = [];
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  for (const body of bodies) {
    const ms = handle(body, v);
    for (const s of STAGES) perStage[s].push(ms[s]);
    totals.push(STAGES.reduce((a, s) => a + ms[s], 0));
  }
  const wallMs = performance.now() - wall0;
  const cpu = process.cpuUsage(cpu0);
  const events = REQUESTS * BATCH;
  const perEventUs = (ms: number[]) => round((ms.reduce((a, b) => a + b, 0) * 1000) / events, 2);
  const sorted = [...totals].sort((a, b) => a - b);
  const r = {
    events,
    totalUsPerEvent: perEventUs(totals),
    stagesUsPerEvent: Object.fromEntries(STAGES.map((s) => [s, perEventUs(perStage[s])])),
    requestMs: { p50: round(percentile(sorted, 50), 2), p95: round(percentile(sorted, 95), 2), p99: round(percentile(sorted, 99), 2) },
    // Includes the garbage collector's time on this thread and its helpers: what the api pays.
    cpuUsPerEvent: round(((cpu.user + cpu.system) / events), 2),
    wallUsPerEvent: round((wallMs * 1000) / events, 2),
  };
  results[v.connector] = r;
  console.log(
    `${v.connector}: ${r.totalUsPerEvent} µs/event (${STAGES.map((s) => `${s} ${r.stagesUsPerEvent[s]}`).join(', ')}); process CPU ${r.cpuUsPerEvent} µs/event; ` +
      `a ${BATCH}-event request p50 ${r.requestMs.p50} / p99 ${r.requestMs.p99} ms`,
  );
}
const file = writeResult(args.out!, { benchmark: 'api-cpu', at: new Date().toISOString(), machine: machine(), settings: { requests: REQUESTS, batch: BATCH, newDevices: NEW_DEVICES }, results });
console.log(`written to ${file}`);
