import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Admin } from 'kafkajs';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { ProcessorRuntime } from '../../pipeline/processors/runtime.js';
import type { Processor } from '../../pipeline/processors/processor.js';
import { createOccupancyProcessor } from '../../pipeline/processors/occupancy.js';
import { VenueInfos } from '../../pipeline/processors/venues.js';
import { committedToEnd, deviceId, event, newVenue, openProcHarness, produce, readAll, waitFor, type ProcHarness } from './harness.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;

let clean: ProcHarness;
let crashed: ProcHarness;
let shared: ProcHarness;
let fencedOut: ProcHarness;
const children: ChildProcess[] = [];

/** Starts the processors of `prefix` in a child process; resolves once it says so. */
async function startChild(prefix: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['node_modules/vite-node/vite-node.mjs', 'test/processors/child.ts', prefix], {
    env: process.env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => d.toString().includes('started') && resolve());
    child.on('exit', (code) => reject(new Error(`processor child exited with ${code}`)));
  });
  return child;
}

const sortedValues = (ms: Array<{ value: Buffer | null }>) => ms.map((m) => m.value!.toString()).sort();
/** The uninterrupted run's outputs, per output topic. */
const reference: Record<string, string[]> = {};

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.on('exit', () => resolve())));

async function committed(admin: Admin, groupId: string, topic: string): Promise<number> {
  const [group] = await admin.fetchOffsets({ groupId, topics: [topic] });
  return group!.partitions.reduce((n, p) => n + Math.max(0, Number(p.offset)), 0);
}

/** Runs the child until the processor read everything and their timers had their turn, then stops it cleanly. */
async function finish(h: ProcHarness, child: ChildProcess): Promise<void> {
  await committedToEnd(h.admin, `${h.prefix}.proc.occupancy`, h.topics.events, 120_000);
  await new Promise((r) => setTimeout(r, 2000));
  child.kill('SIGTERM');
  await exited(child);
}

let total = 0;

beforeAll(async () => {
  clean = await openProcHarness();
  crashed = await openProcHarness();
  shared = await openProcHarness();
  fencedOut = await openProcHarness();
  const now = Date.now();
  const resetHour = (new Date(now).getUTCHours() + 12) % 24;
  const start = Math.floor((now - 8 * HOUR) / MINUTE) * MINUTE;
  const events: CanonicalEvent[] = [];
  for (let v = 0; v < 6; v++) {
    const venue = await newVenue(clean.db, {
      resetHour,
      zones: [
        { slug: 'door', type: 'entrance' },
        { slug: 'hall', type: 'area', capacity: 80 },
      ],
    });
    for (let i = 0; i < 5000; i++) {
      const ts = start + Math.floor((i * 7 * HOUR) / 5000) + (i % 3) * 20_000;
      const base = { operatorId: venue.operatorId, venueId: venue.venueId, ts };
      switch (i % 5) {
        case 0:
          events.push(event({ ...base, type: 'entry', zoneId: venue.zones.door!, metrics: { entries: 1 + (i % 3) } }));
          break;
        case 1:
          events.push(event({ ...base, type: 'exit', zoneId: i % 2 ? venue.zones.door! : null, metrics: { exits: 1 + (i % 4) } }));
          break;
        case 2:
          events.push(
            event({
              ...base,
              type: i % 7 === 0 ? 'occupancy' : 'entry',
              zoneId: venue.zones.hall!,
              metrics: i % 7 === 0 ? { occupancy: i % 60 } : { entries: 1 },
            }),
          );
          break;
        default:
          events.push(
            event({
              ...base,
              type: 'device_seen',
              device: deviceId(`dev-${v}-${Math.floor(i / 40) % 90}`),
              zoneId: i % 4 ? venue.zones.hall! : null,
            }),
          );
      }
    }
  }
  total = events.length;
  // The same input for both runs, in the same order.
  await produce(clean, events);
  await produce(crashed, events);
  await produce(shared, events);
  await produce(fencedOut, events);
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await clean.close();
  await crashed.close();
  await shared.close();
  await fencedOut.close();
});

describe('a processor killed with kill -9 mid-stream', () => {
  it('restarts from its changelog and committed offsets and produces exactly the outputs of an uninterrupted run', async () => {
    await finish(clean, await startChild(clean.prefix));

    const victim = await startChild(crashed.prefix);
    const group = `${crashed.prefix}.proc.occupancy`;
    await waitFor('some batches committed', async () => (await committed(crashed.admin, group, crashed.topics.events)) > 0, 60_000);
    const before = await committed(crashed.admin, group, crashed.topics.events);
    victim.kill('SIGKILL');
    await exited(victim);
    expect(before).toBeLessThan(total);
    await finish(crashed, await startChild(crashed.prefix));

    for (const topic of ['occupancy'] as const) {
      reference[topic] = sortedValues(await readAll(clean, clean.derived[topic]));
      const got = sortedValues(await readAll(crashed, crashed.derived[topic]));
      expect(reference[topic].length, `${topic} outputs`).toBeGreaterThan(100);
      expect(got.length, `${topic} count`).toBe(reference[topic].length);
      expect(got, topic).toEqual(reference[topic]);
    }
  });
});

describe('a second instance joining mid-stream', () => {
  it('takes over partitions from the changelog without losing or repeating an output', async () => {
    const h = shared;
    const start = () =>
      Promise.all(
        [createOccupancyProcessor({ venues: new VenueInfos(h.db), inputTopic: h.topics.events, outputTopic: h.derived.occupancy })].map(
          async (p) => {
            const rt = new ProcessorRuntime(p as Processor<unknown>, {
              kafka: h.kafka,
              log: h.log,
              prefix: h.prefix,
              partitions: h.cfg.KAFKA_PARTITIONS,
              tickMs: 300,
            });
            await rt.start();
            return rt;
          },
        ),
      );
    const first = await start();
    await waitFor(
      'some batches committed',
      async () => (await committed(h.admin, `${h.prefix}.proc.occupancy`, h.topics.events)) > 0,
      60_000,
    );
    const second = await start();
    try {
      await committedToEnd(h.admin, `${h.prefix}.proc.occupancy`, h.topics.events, 120_000);
      await new Promise((r) => setTimeout(r, 2000));
      // Both members held partitions, and restored them from the changelog after the rebalance (the
      // second may find nothing left to read on a busy machine, but it restores what it was given).
      expect(second[0]!.stats.restores).toBeGreaterThan(0);
      expect(first[0]!.stats.restores).toBeGreaterThanOrEqual(2);
    } finally {
      for (const rt of [...second, ...first]) await rt.stop();
    }
    for (const topic of ['occupancy'] as const) {
      expect(sortedValues(await readAll(h, h.derived[topic])), topic).toEqual(reference[topic]);
    }
  });
});

describe('a member that lost a partition and has not noticed yet', () => {
  it('can no longer commit for it once the new owner took the partition, and the owner outputs exactly once', async () => {
    const h = fencedOut;
    const processor = createOccupancyProcessor({
      venues: new VenueInfos(h.db),
      inputTopic: h.topics.events,
      outputTopic: h.derived.occupancy,
    });
    const rt = new ProcessorRuntime(processor as Processor<unknown>, {
      kafka: h.kafka,
      log: h.log,
      prefix: h.prefix,
      partitions: h.cfg.KAFKA_PARTITIONS,
      tickMs: 300,
    });
    // The previous owner of every partition, each in the middle of a transaction that wrote an output.
    const previous = await Promise.all(
      Array.from({ length: h.cfg.KAFKA_PARTITIONS }, async (_, p) => {
        const producer = h.kafka.producer({ transactionalId: `${rt.group}.p${p}`, idempotent: true, maxInFlightRequests: 1 });
        await producer.connect();
        const txn = await producer.transaction();
        await txn.send({
          topic: h.derived.occupancy,
          acks: -1,
          messages: [{ partition: p, key: 'stale', value: 'from the previous owner' }],
        });
        return { producer, txn };
      }),
    );
    try {
      await rt.start();
      try {
        await committedToEnd(h.admin, rt.group, h.topics.events, 120_000);
        await new Promise((r) => setTimeout(r, 2000));
      } finally {
        await rt.stop();
      }
      for (const { txn } of previous) await expect(txn.commit()).rejects.toThrow();
    } finally {
      for (const { producer } of previous) await producer.disconnect();
    }
    expect(sortedValues(await readAll(h, h.derived.occupancy))).toEqual(reference.occupancy);
  });
});
