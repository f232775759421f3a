/**
 * bench:kafka-encode: kafkajs's CPU to encode the produce request of one ingest request (the api's
 * own events-topic messages for the bodies bench:ingest sends, in one partition), with its own
 * copying encoder and with lib/kafkajs-encoder.ts. Each encoder runs in a child process of its own
 * (the mend changes kafkajs for the whole process), alternating, three times each. No broker: the
 * request is built as kafkajs builds it before the socket write. See benchmarks/README.md.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { checkEvents, toCanonical } from '../domain/ingest/ingest.js';
import { encodeEventMessages } from '../lib/events/wire.js';
import { useNativeCrc32c } from '../lib/kafkajs-crc32c.js';
import { encodeWithoutCopies } from '../lib/kafkajs-encoder.js';
import { cpuArgs, limits, operatorId, pseudonyms, venues, writeCpuResult } from './lib/cpu.js';
import { round } from './lib/harness.js';
import { ingestBody } from './lib/requests.js';

type Mode = 'copying' | 'by-reference';
const MODES: Mode[] = ['copying', 'by-reference'];
const PAIRS = 3;
const DISTINCT = 20;
const child = process.env.BENCH_KAFKA_ENCODER as Mode | undefined;

if (child) {
  const args = cpuArgs('kafka-encode');
  useNativeCrc32c();
  if (child === 'by-reference' && !encodeWithoutCopies()) throw new Error('kafkajs no longer takes the encoder mend');
  const require = createRequire(import.meta.url);
  const produce = require('kafkajs/src/protocol/requests/produce/v3/request.js') as (o: object) => unknown;
  const request = require('kafkajs/src/protocol/request.js') as (o: object) => Promise<{ buffer: Buffer }>;
  const out: Record<string, number> = {};
  for (const v of venues) {
    // A few distinct requests encoded over and over: the bodies held stay small, so the collector times the encoding, not them.
    const requests = Array.from({ length: DISTINCT }, () => {
      const now = Date.now();
      const { events } = JSON.parse(ingestBody(v, args.batch, args.newDevices, now)) as { events: unknown[] };
      const { valid } = checkEvents(events, v.connector, now, { days: limits.retentionDays, plan: limits.label });
      const ctx = { key: pseudonyms.keyFor(operatorId), operatorId, venueId: v.venueId, connectorType: v.connector, receivedAt: now };
      return encodeEventMessages(valid.map((e) => toCanonical(e, ctx))).map((m) => ({ key: v.venueId, ...m }));
    });
    const encode = async (messages: unknown[]) => {
      const topicData = [{ topic: 'bench.events.v1', partitions: [{ partition: 0, firstSequence: 0, messages }] }];
      const r = produce({ acks: -1, timeout: 30_000, compression: 0, topicData, producerId: 1, producerEpoch: 0 });
      return (await request({ correlationId: 1, clientId: 'bench', request: r })).buffer.length;
    };
    for (const m of requests) await encode(m);
    (globalThis as { gc?: () => void }).gc?.();
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < args.requests; i++) await encode(requests[i % DISTINCT]!);
    const cpu = process.cpuUsage(cpu0);
    out[v.connector] = round((cpu.user + cpu.system) / (args.requests * args.batch), 3);
  }
  process.stdout.write(JSON.stringify(out));
} else {
  const args = cpuArgs('kafka-encode');
  console.log(
    `bench:kafka-encode  ${args.requests} requests of ${args.batch} events per connector, each encoder ${PAIRS} times, alternating`,
  );
  const runs: Record<Mode, Array<Record<string, number>>> = { copying: [], 'by-reference': [] };
  for (let i = 0; i < PAIRS; i++)
    for (const mode of MODES) {
      const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
        env: { ...process.env, BENCH_KAFKA_ENCODER: mode },
        encoding: 'utf8',
      });
      if (r.status !== 0) throw new Error(`the ${mode} run failed: ${r.stderr}`);
      const figures = JSON.parse(r.stdout) as Record<string, number>;
      runs[mode].push(figures);
      console.log(
        `${mode}: ${Object.entries(figures)
          .map(([c, us]) => `${c} ${us} µs/event`)
          .join(', ')}`,
      );
    }
  writeCpuResult('kafka-encode', args.out, { requests: args.requests, batch: args.batch, newDevices: args.newDevices, pairs: PAIRS }, runs);
}
