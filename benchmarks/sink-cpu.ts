/**
 * bench:sink-cpu: the events sink's own CPU per event, without I/O: decode an events-topic message
 * (the api's own encoding of the bodies bench:ingest sends), check each event against the contract,
 * build the ClickHouse rows and write them as JSONEachRow, as the sink hands them to the client.
 * One thread, no engines, like bench:api-cpu. See benchmarks/README.md#benchsink-cpu.
 */
import { parseArgs } from 'node:util';
import { checkEvents, toCanonical } from '../domain/ingest/ingest.js';
import { Pseudonyms } from '../domain/ingest/pseudonyms.js';
import { PLAN_LIMITS } from '../domain/tenants/plans.js';
import { encodeEventMessages } from '../lib/events.js';
import { eventsTarget } from '../pipeline/sink/events-sink.js';
import type { Queryable } from '../postgres/client.js';
import { ingestBody, randomMac, type BenchVenue } from './lib/requests.js';
import { machine, percentile, round, writeResult } from './lib/harness.js';

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '400' },
    batch: { type: 'string', default: '1000' },
    'new-devices': { type: 'string', default: '0.1' },
    out: { type: 'string', default: 'sink-cpu' },
  },
});
const MESSAGES = Number(args.messages);
const BATCH = Number(args.batch);
const NEW_DEVICES = Number(args['new-devices']);

const pseudonyms = new Pseudonyms('bench-sink-cpu-pseudonym-secret-0123456789');
const operatorId = '7d8f3c4e-9b1a-4f2e-8c3d-5a6b7c8d9e0f';
const limits = PLAN_LIMITS.pro;
const venues: BenchVenue[] = [
  { venueId: '2b1c0d9e-8f7a-4b6c-9d5e-4f3a2b1c0d9e', connector: 'meraki', pool: Array.from({ length: 2000 }, randomMac) },
  { venueId: '3c2d1e0f-9a8b-4c7d-8e6f-5a4b3c2d1e0f', connector: 'density', pool: [] },
];
// Decoding needs no database: only the write's bookkeeping does, and nothing is written here.
const target = eventsTarget(null as unknown as Queryable);
const place = { operatorId, timezone: 'Europe/Berlin', retentionDays: limits.retentionDays };

/** The events-topic message the api publishes for one request. */
function messageOf(v: BenchVenue): Buffer {
  const now = Date.now();
  const { valid } = checkEvents((JSON.parse(ingestBody(v, BATCH, NEW_DEVICES, now)) as { events: unknown[] }).events, v.connector, now, { days: limits.retentionDays, plan: limits.label });
  const ctx = { key: pseudonyms.keyFor(operatorId), operatorId, venueId: v.venueId, connectorType: v.connector, receivedAt: now };
  const [message] = encodeEventMessages(valid.map((e) => toCanonical(e, ctx)));
  return message!.value;
}

type Stage = 'decode' | 'rows' | 'encode';
const STAGES: Stage[] = ['decode', 'rows', 'encode'];

function handle(value: Buffer, offset: number): Record<Stage, number> {
  const t0 = performance.now();
  const parts = target.decode(value);
  const t1 = performance.now();
  const rows = parts.map((p, index) => {
    if (!('toRow' in p)) throw new Error(`the bench's own event was refused: ${p.error}`);
    return p.toRow({ topic: 'bench.events', partition: 0, offset: String(offset), index }, place);
  });
  const t2 = performance.now();
  // What @clickhouse/client does with the rows of a JSONEachRow insert.
  let bytes = 0;
  for (const row of rows) bytes += (JSON.stringify(row) + '\n').length;
  if (bytes === 0) throw new Error('nothing encoded');
  const t3 = performance.now();
  return { decode: t1 - t0, rows: t2 - t1, encode: t3 - t2 };
}

console.log(`bench:sink-cpu  ${MESSAGES} messages of ${BATCH} events per connector, ${NEW_DEVICES * 100} % new devices`);
const results: Record<string, unknown> = {};
for (const v of venues) {
  const messages = Array.from({ length: MESSAGES }, () => messageOf(v));
  for (let i = 0; i < Math.min(50, MESSAGES); i++) handle(messages[i]!, i);
  const perStage: Record<Stage, number[]> = { decode: [], rows: [], encode: [] };
  const totals: number[] = [];
  const cpu0 = process.cpuUsage();
  messages.forEach((m, i) => {
    const ms = handle(m, i);
    for (const s of STAGES) perStage[s].push(ms[s]);
    totals.push(STAGES.reduce((a, s) => a + ms[s], 0));
  });
  const cpu = process.cpuUsage(cpu0);
  const events = MESSAGES * BATCH;
  const perEventUs = (ms: number[]) => round((ms.reduce((a, b) => a + b, 0) * 1000) / events, 2);
  const sorted = [...totals].sort((a, b) => a - b);
  const r = {
    events,
    totalUsPerEvent: perEventUs(totals),
    stagesUsPerEvent: Object.fromEntries(STAGES.map((s) => [s, perEventUs(perStage[s])])),
    messageMs: { p50: round(percentile(sorted, 50), 2), p99: round(percentile(sorted, 99), 2) },
    cpuUsPerEvent: round((cpu.user + cpu.system) / events, 2),
  };
  results[v.connector] = r;
  console.log(`${v.connector}: ${r.totalUsPerEvent} µs/event (${STAGES.map((s) => `${s} ${r.stagesUsPerEvent[s]}`).join(', ')}); process CPU ${r.cpuUsPerEvent} µs/event`);
}
const file = writeResult(args.out!, { benchmark: 'sink-cpu', at: new Date().toISOString(), machine: machine(), settings: { messages: MESSAGES, batch: BATCH, newDevices: NEW_DEVICES }, results });
console.log(`written to ${file}`);
