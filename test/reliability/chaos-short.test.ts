import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCh, type Ch } from '../../clickhouse/client.js';
import { Fleet, settle, type FleetTenant } from '../../benchmarks/lib/fleet.js';
import { testConfig } from '../support/env.js';
import { request } from '../support/http.js';
import { freePort, sleep } from '../edge/support.js';

/**
 * The short version of `npm run chaos` (benchmarks/chaos.ts): two api processes and the pipeline
 * process; while a small fleet ingests through both apis, the pipeline is killed with -9 and
 * restarted, and one api is killed with -9 (its clients fail over to the other). Every accepted
 * event is then stored exactly once, the `events` rollup equals the raw table, and no request was
 * refused outside the contract or left hanging.
 */

const cfg = testConfig();
const prefix = `${cfg.KAFKA_TOPIC_PREFIX}.chaos-${randomUUID().slice(0, 8)}`;
const env = {
  ...process.env,
  KAFKA_TOPIC_PREFIX: prefix,
  REDIS_KEY_PREFIX: `${prefix}:`,
  RATE_LIMITS_ENABLED: 'false',
  PROCESSOR_TICK_MS: '500',
  SHUTDOWN_TIMEOUT_MS: '10000',
};
const children: ChildProcess[] = [];

function start(entry: string, extra: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, ['node_modules/vite-node/vite-node.mjs', entry], { env: { ...env, ...extra }, stdio: 'ignore' });
  children.push(child);
  return child;
}

async function kill9(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

let ch: Ch;
let urls: string[] = [];
let apis: ChildProcess[] = [];

beforeAll(async () => {
  const ports = [await freePort(), await freePort()];
  urls = ports.map((p) => `http://127.0.0.1:${p}`);
  apis = ports.map((p) => start('apps/api/main.ts', { API_HOST: '127.0.0.1', API_PORT: String(p) }));
  start('apps/pipeline/main.ts');
  ch = createCh(cfg);
  for (const url of urls) {
    const deadline = Date.now() + 60_000;
    while ((await request(`${url}/health`).catch(() => ({ status: 0 }))).status !== 200) {
      if (Date.now() > deadline) throw new Error(`${url} did not start`);
      await sleep(250);
    }
  }
}, 120_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await ch?.close();
});

describe('chaos, short: kill -9 the pipeline and an api during ingest', () => {
  it('stores every accepted event exactly once, rollups equal to raw, every refusal within the contract', async () => {
    const admin = { 'x-admin-key': cfg.ADMIN_SECRET };
    const tenants: FleetTenant[] = [];
    for (let i = 0; i < 3; i++) {
      const op = await request(`${urls[0]}/api/operators`, {
        headers: admin,
        json: { name: `chaos ${i}`, email: `chaos-${i}-${Date.now()}@example.com`, plan: 'pro' },
      });
      expect(op.status).toBe(201);
      const venue = await request(`${urls[0]}/api/venues`, { key: op.body.api_key, json: { name: `Chaos ${i}`, timezone: 'UTC' } });
      expect(venue.status).toBe(201);
      tenants.push({ key: op.body.api_key, venueId: venue.body.id, kind: i === 2 ? 'occupancy' : 'devices' });
    }
    // Without Idempotency-Keys a resend after the api kill goes straight to the other instance; the
    // event ids alone keep it from being stored twice (the sink keeps the first of each id).
    const fleet = new Fleet({
      urls,
      tenants,
      batchSize: 200,
      clients: 4,
      clientTimeoutMs: 15_000,
      runTag: randomUUID().slice(0, 8),
      rate: 1_500,
      idempotencyKeys: false,
    });

    let faultsDone = false;
    const faults = (async () => {
      await sleep(2_000);
      await kill9(children[2]!);
      await sleep(1_000);
      start('apps/pipeline/main.ts');
      await sleep(2_000);
      await kill9(apis[1]!);
      await sleep(3_000);
      faultsDone = true;
    })();
    await Promise.all([fleet.ingest(6_000, () => !faultsDone), faults]);

    expect(fleet.stats.violations).toEqual([]);
    expect(fleet.stats.timeouts).toBe(0);
    const { check } = await settle(ch, fleet.stats, 90_000);
    expect(check.accepted).toBeGreaterThanOrEqual(6_000);
    expect(check).toMatchObject({ missing: 0, duplicates: 0, rollupMismatches: [] });
    expect(check.distinct).toBe(check.accepted);
  }, 150_000);
});
