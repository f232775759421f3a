/**
 * bench:sink-cpu: the events sink's own CPU per event, without I/O: decode an events-topic message
 * (the api's own encoding of the bodies bench:ingest sends), check each event against the contract,
 * build the ClickHouse rows and encode them as TabSeparated, as the sink streams them to ClickHouse.
 * One thread, no engines, like bench:api-cpu. See benchmarks/README.md#benchsink-cpu.
 */
import { eventTsvChunks } from '../clickhouse/queries/events.js';
import { checkEvents, toCanonical } from '../domain/ingest/ingest.js';
import { encodeEventMessages } from '../lib/events/wire.js';
import { eventsTarget } from '../pipeline/sink/events-sink.js';
import type { Queryable } from '../postgres/client.js';
import { cpuArgs, limits, operatorId, pseudonyms, report, timeStages, venues, writeCpuResult } from './lib/cpu.js';
import { ingestBody, type BenchVenue } from './lib/requests.js';

const args = cpuArgs('sink-cpu');
const STAGES = ['decode', 'rows', 'encode'] as const;
// Decoding needs no database: only the write's bookkeeping does, and nothing is written here.
const target = eventsTarget(null as unknown as Queryable);
const place = { operatorId, timezone: 'Europe/Berlin', retentionDays: limits.retentionDays };

/** The events-topic messages the api publishes for one request. */
function messagesOf(v: BenchVenue, n: number): Buffer[] {
  const now = Date.now();
  const body = ingestBody(v, args.batch, args.newDevices, now, undefined, args.eventIds ? `bench-${n}` : undefined);
  const { events } = JSON.parse(body) as { events: unknown[] };
  const { valid } = checkEvents(events, v.connector, now, { days: limits.retentionDays, plan: limits.label });
  const ctx = { key: pseudonyms.keyFor(operatorId), operatorId, venueId: v.venueId, connectorType: v.connector, receivedAt: now };
  return encodeEventMessages(valid.map((e) => toCanonical(e, ctx))).map((m) => m.value);
}

function handle(values: Buffer[], offset: number): Record<(typeof STAGES)[number], number> {
  const t0 = performance.now();
  const parts = values.flatMap((value) => target.decode(value));
  const t1 = performance.now();
  const rows = parts.map((p, index) => {
    if (!('toRow' in p)) throw new Error(`the bench's own event was refused: ${p.error}`);
    return p.toRow({ topic: 'bench.events', partition: 0, offset: String(offset), index }, place);
  });
  const t2 = performance.now();
  let bytes = 0;
  for (const chunk of eventTsvChunks(rows)) bytes += chunk.length;
  if (bytes === 0) throw new Error('nothing encoded');
  const t3 = performance.now();
  return { decode: t1 - t0, rows: t2 - t1, encode: t3 - t2 };
}

console.log(
  `bench:sink-cpu  ${args.requests} requests of ${args.batch} events per connector, ${args.newDevices * 100} % new devices${args.eventIds ? ', event ids' : ''}`,
);
const results: Record<string, unknown> = {};
for (const v of venues) {
  const requests = Array.from({ length: args.requests }, (_, n) => messagesOf(v, n));
  const r = timeStages(STAGES, requests, args.batch, handle);
  results[v.connector] = r;
  report(v.connector, r, `${args.batch}-event request`);
}
writeCpuResult(
  'sink-cpu',
  args.out,
  { requests: args.requests, batch: args.batch, newDevices: args.newDevices, eventIds: args.eventIds },
  results,
);
