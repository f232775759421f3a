/**
 * bench:api-cpu: the api's own CPU per ingested event, without I/O: the work of `POST /ingest` that
 * grows with the events (parse the body, check each event, pseudonymise, build the canonical events
 * and encode the Kafka message), timed in this process on the bodies bench:ingest sends. Alone on
 * one thread, so its figures move far less than the whole stack's, and a change to the hot path
 * shows here first. See benchmarks/README.md#benchapi-cpu.
 */
import { checkEvents, toCanonical } from '../domain/ingest/ingest.js';
import { encodeEventMessages } from '../lib/events/wire.js';
import { cpuArgs, limits, operatorId, pseudonyms, report, timeStages, venues, writeCpuResult } from './lib/cpu.js';
import { ingestBody, type BenchVenue } from './lib/requests.js';

const args = cpuArgs('api-cpu');
const STAGES = ['parse', 'check', 'canonical', 'encode'] as const;

/** One request's work, stage by stage, in ms. */
function handle(body: string, v: BenchVenue): Record<(typeof STAGES)[number], number> {
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
  if (encodeEventMessages(canonical).length === 0) throw new Error('nothing encoded');
  const t4 = performance.now();
  return { parse: t1 - t0, check: t2 - t1, canonical: t3 - t2, encode: t4 - t3 };
}

console.log(
  `bench:api-cpu  ${args.requests} requests of ${args.batch} events per connector, ${args.newDevices * 100} % new devices${args.eventIds ? ', event ids' : ''}`,
);
const results: Record<string, unknown> = {};
for (const v of venues) {
  // Bodies built ahead, so building them is not timed.
  const bodies = Array.from({ length: args.requests }, (_, n) =>
    ingestBody(v, args.batch, args.newDevices, Date.now(), undefined, args.eventIds ? `bench-${n}` : undefined),
  );
  const r = timeStages(STAGES, bodies, args.batch, (body) => handle(body, v));
  results[v.connector] = r;
  report(v.connector, r, `${args.batch}-event request`);
}
writeCpuResult(
  'api-cpu',
  args.out,
  { requests: args.requests, batch: args.batch, newDevices: args.newDevices, eventIds: args.eventIds },
  results,
);
