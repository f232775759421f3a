import { randomUUID } from 'node:crypto';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { derivedTopicNames } from '../../lib/topology.js';
import { one, sql } from '../../postgres/client.js';
import { runProcessors, type RunningProcessors } from '../../pipeline/processors/run.js';
import { runEventsSink, type RunningEventsSink } from '../../pipeline/sink/events-sink.js';
import { committedToEnd, waitFor } from '../processors/harness.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

/**
 * GET /api/dashboard/connectors' lastEventAt is the newest event the events sink stored for the
 * group's venue and connector type, not the health row's (written on transitions and hourly).
 */
let api: RunningApi;
let sink: RunningEventsSink;
let processors: RunningProcessors;
let admin: Admin;
let op: TestOperator;
let venue: string;
const sinkGroup = (prefix: string) => `${prefix}.sink.events`;
let prefix: string;

beforeAll(async () => {
  prefix = `${testConfig().KAFKA_TOPIC_PREFIX}.lastev${randomUUID().slice(0, 6)}`;
  const cfg = testConfig({ KAFKA_TOPIC_PREFIX: prefix });
  api = await startApi(cfg);
  const { kafka, db, ch, producer, topics, log } = api.services;
  sink = await runEventsSink(kafka, {
    groupId: sinkGroup(prefix),
    partitions: cfg.KAFKA_PARTITIONS,
    ch,
    db,
    producer,
    topics,
    log,
    batchRows: 5000,
    batchMs: 200,
    drainMs: 5000,
  });
  processors = await runProcessors({
    kafka,
    db,
    ch,
    producer,
    log,
    prefix,
    partitions: cfg.KAFKA_PARTITIONS,
    events: topics.events,
    deadLetter: topics.deadLetter,
    derived: derivedTopicNames(prefix),
    batchRows: 5000,
    batchMs: 100,
    drainMs: 5000,
    tickMs: 300,
    only: ['health'],
  });
  admin = kafka.admin();
  await admin.connect();
  op = await newOperator(api, 'pro');
  venue = (await newVenue(api, op.key)).id;
  // Two meraki integrations share the venue's meraki events; density sends nothing until the backfill.
  for (const type of ['meraki', 'meraki', 'density'])
    await db.query(`INSERT INTO integrations (venue_id, connector_type) VALUES ($1, $2)`, [venue, type]);
});

afterAll(async () => {
  await admin?.disconnect();
  await processors?.stop();
  await sink?.stop();
  await api?.close();
});

const seen = (ts: number, i: number) => ({
  type: 'device_seen',
  timestamp: new Date(ts).toISOString(),
  payload: { clientMac: `3C:22:FB:1A:2B:${(16 + i).toString(16)}`, rssi: 40 },
});
const occupancy = (ts: number) => ({
  type: 'occupancy',
  timestamp: new Date(ts).toISOString(),
  payload: { space_id: 'spc_1', update_type: 'live', occupancy: 3 },
});

async function ingest(connectorType: string, events: unknown[]): Promise<void> {
  const res = await request(`${api.url}/ingest`, { key: op.key, json: { venue_id: venue, connector_type: connectorType, events } });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(res.body.accepted, JSON.stringify(res.body)).toBe(events.length);
}

type Group = { type: string; status: string; count: number; lastEventAt: string | null };
const groups = async (): Promise<Group[]> => {
  const res = await request(`${api.url}/api/dashboard/connectors`, { key: op.key });
  expect(res.status).toBe(200);
  return res.body.connectors;
};

describe('GET /api/dashboard/connectors lastEventAt', () => {
  it('is the newest stored event of the venue and type, moving on without a health transition', async () => {
    const base = Date.now();
    // Newest first in the batch: the figure is the newest timestamp, not the last one sent.
    await ingest('meraki', [seen(base - 20_123, 0), seen(base - 45_000, 1), seen(base - 30_000, 2)]);
    const first = new Date(base - 20_123).toISOString();
    const g1 = await waitFor('meraki healthy with its newest event', async () => {
      const g = await groups();
      return g.some((c) => c.type === 'meraki' && c.status === 'healthy' && c.lastEventAt === first) ? g : undefined;
    });
    expect(g1).toEqual([
      { type: 'meraki', status: 'healthy', count: 2, lastEventAt: first },
      // Created a moment ago and never heard from: within its grace, no alarm.
      { type: 'density', status: 'waiting', count: 1, lastEventAt: null },
    ]);

    // Still healthy (no transition, so no new health row): only the stored events move it on.
    await ingest('meraki', [seen(base - 5_250, 3)]);
    const second = new Date(base - 5_250).toISOString();
    const g2 = await waitFor('meraki at the later event', async () => {
      const g = await groups();
      return g.find((c) => c.type === 'meraki')?.lastEventAt === second ? g : undefined;
    });
    expect(g2[0]).toEqual({ type: 'meraki', status: 'healthy', count: 2, lastEventAt: second });
    const row = await one<{ last_event_at: Date }>(api.services.db, sql`SELECT last_event_at FROM venues WHERE id = ${venue}`);
    expect(row!.last_event_at.toISOString()).toBe(second);
  });

  it('is not moved back by a later backfill of older events; a type gets its own', async () => {
    const before = (await groups()).find((c) => c.type === 'meraki')!.lastEventAt!;
    const old = Date.now() - 3 * 3_600_000;
    await ingest('meraki', [seen(old, 4), seen(old + 60_000, 5)]);
    await ingest('density', [occupancy(old - 60_000), occupancy(old + 7)]);
    // The sink commits only after its Postgres update: committed to the end means both are stored.
    await committedToEnd(admin, sinkGroup(prefix), api.services.topics.events);
    const stored = await one<{ n: number }>(
      api.services.db,
      sql`SELECT count(*) AS n FROM venue_connector_events WHERE venue_id = ${venue}`,
    );
    expect(stored!.n).toBe(2);
    const g = await groups();
    expect(g.find((c) => c.type === 'meraki')).toMatchObject({ count: 2, lastEventAt: before });
    expect(g.find((c) => c.type === 'density')).toMatchObject({ count: 1, lastEventAt: new Date(old + 7).toISOString() });
    const row = await one<{ last_event_at: Date }>(api.services.db, sql`SELECT last_event_at FROM venues WHERE id = ${venue}`);
    expect(row!.last_event_at.toISOString()).toBe(before);
  });
});
