import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql } from '../../clickhouse/client.js';
import { testConfig } from '../support/env.js';
import { event, newVenue, openProcHarness, produce, waitFor, type ProcHarness } from './harness.js';

let h: ProcHarness;
let pipeline: ChildProcess;
const prefix = `${testConfig().KAFKA_TOPIC_PREFIX}.pp-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  h = await openProcHarness(prefix);
  pipeline = spawn(process.execPath, ['node_modules/vite-node/vite-node.mjs', 'apps/pipeline/main.ts'], {
    env: { ...process.env, KAFKA_TOPIC_PREFIX: prefix, PROCESSOR_TICK_MS: '300', DERIVE_INTERVAL_MS: '300', SHUTDOWN_TIMEOUT_MS: '20000' },
    stdio: 'ignore',
  });
});

afterAll(async () => {
  if (pipeline.exitCode === null && pipeline.signalCode === null) pipeline.kill('SIGKILL');
  await h.close();
});

describe('the pipeline process', () => {
  it('derives the occupancy history from door counts (the derive job), and shuts down in order on SIGTERM', async () => {
    const venue = await newVenue(h.db, { zones: [{ slug: 'door', type: 'entrance' }] });
    const now = Date.now();
    await produce(h, [
      event({
        operatorId: venue.operatorId,
        venueId: venue.venueId,
        ts: now - 3000,
        type: 'entry',
        zoneId: venue.zones.door!,
        metrics: { entries: 3 },
      }),
      event({
        operatorId: venue.operatorId,
        venueId: venue.venueId,
        ts: now - 2000,
        type: 'exit',
        zoneId: venue.zones.door!,
        metrics: { exits: 1 },
      }),
    ]);
    const rows = await waitFor(
      'the occupancy history',
      async () => {
        const got = await chRows<{ value: number }>(
          h.ch,
          chsql`SELECT max(value) AS value FROM derived_occupancy WHERE venue_id = toUUID(${venue.venueId}) AND live = 1`,
        );
        return got.length > 0 && got[0]!.value === 3 ? got : undefined;
      },
      60_000,
    );
    expect(rows[0]!.value).toBe(3);
    const [raw] = await chRows<{ n: number }>(
      h.ch,
      chsql`SELECT toUInt32(count()) AS n FROM events WHERE venue_id = toUUID(${venue.venueId})`,
    );
    expect(raw!.n).toBe(2);
    const exit = new Promise<number | null>((resolve) => pipeline.on('exit', (code) => resolve(code)));
    pipeline.kill('SIGTERM');
    expect(await exit).toBe(0);
  });
});
