import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql } from '../../clickhouse/client.js';
import { deriveCaughtUp, serverNow } from '../../clickhouse/queries/derive.js';
import { venueDwell } from '../../domain/analytics/dwell.js';
import { predictOccupancy } from '../../domain/analytics/predictions.js';
import { visitorScoring } from '../../domain/analytics/scoring.js';
import { getTelemetry } from '../../domain/telemetry/telemetry.js';
import { createLogger } from '../../lib/logger.js';
import { ApiClient } from '../../simulator/client.js';
import { setUpFleet, type Fleet } from '../../simulator/fleet.js';
import { TrafficState } from '../../simulator/model.js';
import { localDate, weekdayOf } from '../../simulator/time.js';
import { runSimulation } from '../../simulator/runner.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { waitFor } from '../pipeline/harness.js';

/**
 * The demo under real traffic (issue 28): the simulator's backfill gives the same dwell, loyalty,
 * predictions and occupancy history whether it runs on an idle stack or while another operator
 * streams live into the same topics, through the real api, Kafka, the pipeline process (sink,
 * processors, derive job) and ClickHouse. The two fleets send the same history (same seed, same
 * event times); only the delivery around them differs.
 */
const DAY = 86_400_000;
const HOUR = 3_600_000;
const log = createLogger('backfill-test', 'silent');
const prefix = `${testConfig().KAFKA_TOPIC_PREFIX}.bf-${randomUUID().slice(0, 8)}`;
const cfg = testConfig({ KAFKA_TOPIC_PREFIX: prefix, RATE_LIMITS_ENABLED: 'false' });
/** History ends here (both runs); the figures are read as of this instant. */
const START = Math.floor(Date.now() / HOUR) * HOUR;
const FROM = START - 2 * DAY;

let api: RunningApi;
let pipeline: ChildProcess;

beforeAll(async () => {
  api = await startApi(cfg);
  pipeline = spawn(process.execPath, ['node_modules/vite-node/vite-node.mjs', 'apps/pipeline/main.ts'], {
    env: {
      ...process.env,
      KAFKA_TOPIC_PREFIX: prefix,
      RATE_LIMITS_ENABLED: 'false',
      PROCESSOR_TICK_MS: '500',
      DERIVE_INTERVAL_MS: '500',
      SHUTDOWN_TIMEOUT_MS: '10000',
    },
    stdio: 'ignore',
  });
}, 60_000);

afterAll(async () => {
  if (pipeline.exitCode === null && pipeline.signalCode === null) pipeline.kill('SIGKILL');
  await api?.close();
});

const client = () => new ApiClient({ url: api.url, log });
const fleet = (name: string) =>
  setUpFleet({ client: client(), log, operatorName: name, plan: 'pro', venues: 4, adminSecret: () => cfg.ADMIN_SECRET });

async function backfill(f: Fleet): Promise<number> {
  const c = client();
  c.key = f.state.operator.key;
  let accepted = 0;
  await runSimulation({
    client: c,
    venues: f.venues,
    traffic: new TrafficState({ seed: 28, scale: 0.05, faults: false }),
    log,
    start: START,
    backfillFrom: FROM,
    live: false,
    stopping: () => false,
    onBatch: (b) => (accepted += b.answer.accepted),
  });
  return accepted;
}

/** Waits until the fleet's events are all stored and a derive round started after that. */
async function settled(f: Fleet, accepted: number): Promise<void> {
  const ch = api.services.ch;
  const ids = f.venues.map((v) => v.id);
  await waitFor(
    'every accepted event stored',
    async () => {
      const [row] = await chRows<{ n: number }>(ch, chsql`SELECT toUInt32(count()) AS n FROM events WHERE has(${ids}, toString(venue_id))`);
      return Number(row!.n) >= accepted;
    },
    180_000,
  );
  const stored = await serverNow(ch);
  await waitFor('a derive round after the last insert, carrying nothing over', () => deriveCaughtUp(ch, 'derive', stored + 1), 180_000);
}

/** Everything the analytics endpoints answer for the fleet's venues, as of START. */
async function figures(f: Fleet) {
  const deps = { db: api.services.db, ch: api.services.ch };
  const operatorId = f.state.operator.id!;
  const out = [];
  for (const v of f.venues) {
    const dwell = await venueDwell(deps, operatorId, { id: v.id, range: '7d' }, START);
    const scoring = await visitorScoring(deps, operatorId, { id: v.id, range: '7d' }, START);
    // Hours of the venue's local yesterday, which the two days of history always hold whole, whatever the hour the test runs at.
    const dayOfWeek = weekdayOf(localDate(START - DAY, v.timezone));
    const predictions = [];
    for (const hour of [2, 11, 13, 18]) predictions.push(await predictOccupancy(deps, operatorId, { id: v.id, dayOfWeek, hour }, START));
    const hourly = (await getTelemetry(deps, operatorId, v.id, {
      keys: ['occupancy'],
      startTs: FROM,
      endTs: START,
      interval: HOUR,
      agg: 'AVG',
      fill: 'null',
    })) as Record<string, unknown[]>;
    const daily = (await getTelemetry(deps, operatorId, v.id, {
      keys: ['occupancy'],
      startTs: FROM,
      endTs: START,
      interval: DAY,
      agg: 'MAX',
      fill: 'none',
    })) as Record<string, unknown[]>;
    out.push({
      venue: v.key,
      dwell: dwell.zones.map((z) => z.buckets.map((b) => b.count)),
      scoring: scoring.segments,
      predictions,
      hourly: hourly.occupancy,
      daily: daily.occupancy,
    });
  }
  return out;
}

describe('the simulator backfill beside another operator streaming live', () => {
  it('gives the same dwell, loyalty, predictions and occupancy history as on an idle stack', async () => {
    const idle = await fleet('Backfill idle');
    const idleAccepted = await backfill(idle);
    await settled(idle, idleAccepted);
    const alone = await figures(idle);
    // Not an empty picture: visits in every venue, occupancy over the days.
    for (const v of alone) {
      expect(
        v.dwell[0]!.reduce((a, b) => a + b, 0),
        `${v.venue} visits`,
      ).toBeGreaterThan(0);
      expect(
        v.scoring.reduce((a, s) => a + s.count, 0),
        `${v.venue} visitors`,
      ).toBeGreaterThan(0);
    }
    expect(alone.some((v) => v.predictions.some((p) => p.mean > 0))).toBe(true);
    expect(alone.some((v) => (v.hourly as Array<{ value: number | null }>).some((p) => (p.value ?? 0) > 0))).toBe(true);

    const neighbour = await fleet('Live neighbour');
    const busy = await fleet('Backfill busy');
    let stop = false;
    const c = client();
    c.key = neighbour.state.operator.key;
    // The neighbour pushes what its venues see every 100 ms, sightings and door counts stamped now.
    let neighbourAccepted = 0;
    const live = (async () => {
      for (let i = 0; !stop; i++) {
        const now = new Date().toISOString();
        for (const v of neighbour.venues) {
          const seen = Array.from({ length: 20 }, (_, d) => ({
            type: 'device_seen',
            timestamp: now,
            payload: { clientMac: `02:00:00:00:${(i % 50).toString(16).padStart(2, '0')}:${d.toString(16).padStart(2, '0')}`, rssi: 40 },
          }));
          const counted = [{ type: 'occupancy', timestamp: now, payload: { space_id: 'spc_1', update_type: 'live', occupancy: i % 30 } }];
          neighbourAccepted += (await c.ingest(v.id, 'meraki', seen)).accepted + (await c.ingest(v.id, 'density', counted)).accepted;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    let busyAccepted: number;
    try {
      await waitFor('the neighbour streaming', async () => neighbourAccepted > 100, 30_000);
      busyAccepted = await backfill(busy);
    } finally {
      stop = true;
      await live;
    }
    await settled(busy, busyAccepted);
    expect(busyAccepted).toBe(idleAccepted);
    expect(await figures(busy)).toEqual(alone);
  }, 480_000);
});
