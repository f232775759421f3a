import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafka, createProducer } from '../../lib/kafka.js';
import { createLogger } from '../../lib/logger.js';
import { derivedTopicNames } from '../../lib/topology.js';
import { encodeOccupancyUpdate } from '../../lib/events/derived.js';
import { rows, sql } from '../../postgres/client.js';
import { startApi, type RunningApi } from '../support/env.js';
import { newSite, occupancy, sleep, until } from './support.js';

let api: RunningApi;
let pipeline: ChildProcess;
let exited: Promise<number | null>;
let output = '';

beforeAll(async () => {
  api = await startApi();
  pipeline = spawn(process.execPath, ['node_modules/vite-node/vite-node.mjs', 'apps/pipeline/main.ts'], {
    env: { ...process.env, LOG_LEVEL: 'info', SHUTDOWN_TIMEOUT_MS: '20000' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  pipeline.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  pipeline.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  exited = new Promise((resolve) => pipeline.on('exit', (code) => resolve(code)));
  await until('the pipeline to run the alarm rules', async () => (output.includes('alarm rules running') ? true : undefined), 60_000);
});
afterAll(async () => {
  if (pipeline.exitCode === null && pipeline.signalCode === null) pipeline.kill('SIGKILL');
  await api.close();
});

describe('the pipeline process', () => {
  it("runs the alarm rules on the run's topics, and on SIGTERM stops them in order and exits 0", async () => {
    const site = await newSite(api);
    const zoneId = await site.zone(20);
    const kafka = createKafka(api.services.cfg, createLogger('alarm-test', 'silent'));
    const producer = createProducer(kafka);
    await producer.connect();
    const u = occupancy(site, zoneId, 20);
    await producer.send({
      topic: derivedTopicNames(api.services.cfg.KAFKA_TOPIC_PREFIX).occupancy,
      acks: -1,
      messages: [{ key: u.venueId, value: encodeOccupancyUpdate(u) }],
    });
    await producer.disconnect();
    const alarms = await until('the alarm', async () => {
      const r = await rows<{ severity: string }>(api.services.db, sql`SELECT severity FROM alarms WHERE zone_id = ${zoneId}`);
      return r.length > 0 ? r : undefined;
    });
    expect(alarms).toEqual([{ severity: 'CRITICAL' }]);
    await sleep(500);
    pipeline.kill('SIGTERM');
    expect(await exited).toBe(0);
    // The rules stopped (input in hand finished, offsets committed) before the engines closed and the process said it stopped.
    const rulesStopped = output.indexOf('"msg":"alarm rules stopped"');
    expect(rulesStopped).toBeGreaterThan(-1);
    expect(output.indexOf('"msg":"stopped"')).toBeGreaterThan(rulesStopped);
  });
});
