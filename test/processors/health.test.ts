import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { createPublisher, type Publisher } from '../../lib/kafka.js';
import { createRedis } from '../../lib/redis.js';
import { decodeConnectorHealthChange, type ConnectorHealthChange } from '../../lib/events/derived.js';
import { one, sql } from '../../postgres/client.js';
import { ingestBatch, type IngestDeps } from '../../domain/ingest/ingest.js';
import { Pseudonyms } from '../../domain/ingest/pseudonyms.js';
import { Throughput } from '../../domain/system/throughput.js';
import { connectorHealth } from '../../domain/analytics/connectors.js';
import { healthOf, type LinkRecord } from '../../pipeline/processors/health.js';
import { reportSourceOutcome } from '../../domain/integrations/sources.js';
import type { RunningProcessors } from '../../pipeline/processors/run.js';
import { newVenue, openProcHarness, readAll, startProcessors, waitFor, type ProcHarness } from './harness.js';

let h: ProcHarness;
let redis: Redis;
let publisher: Publisher;
let deps: IngestDeps;
let run: RunningProcessors;
let mine: Awaited<ReturnType<typeof newVenue>>;
let theirs: Awaited<ReturnType<typeof newVenue>>;
const ids: Record<string, string> = {};

async function integration(venueId: string, type: string): Promise<string> {
  return (await one<{ id: string }>(
    h.db,
    sql`INSERT INTO integrations (venue_id, connector_type) VALUES (${venueId}, ${type}) RETURNING id`,
  ))!.id;
}

const at = () => new Date().toISOString();
const send = (operatorId: string, venueId: string, connectorType: 'meraki' | 'density' | 'verkada', events: unknown[]) =>
  ingestBatch(deps, { operator: { id: operatorId, plan: 'pro', billingAnchor: new Date() }, venueId, connectorType, events });

const changes = async (): Promise<ConnectorHealthChange[]> =>
  (await readAll(h, h.derived.connectorHealth, 500)).map((m) => decodeConnectorHealthChange(m.value));

beforeAll(async () => {
  h = await openProcHarness();
  redis = createRedis(h.cfg);
  await redis.connect();
  publisher = createPublisher(h.kafka, h.log);
  deps = {
    db: h.db,
    publisher,
    topic: h.topics.events,
    reportsTopic: h.derived.ingestReports,
    pseudonyms: new Pseudonyms(h.cfg.PSEUDONYM_KEY),
    throughput: new Throughput(redis),
    log: h.log,
  };
  mine = await newVenue(h.db);
  theirs = await newVenue(h.db);
  ids.meraki = await integration(mine.venueId, 'meraki');
  ids.density = await integration(mine.venueId, 'density');
  ids.verkada = await integration(mine.venueId, 'verkada');
  ids.theirs = await integration(theirs.venueId, 'meraki');
  run = await startProcessors(h, ['health'], 200);
});

afterAll(async () => {
  await run?.stop();
  await publisher.disconnect();
  redis.disconnect();
  await h.close();
});

describe('heartbeats at ingest', () => {
  it('count only for an active integration of the venue and connector type', async () => {
    const res = await send(mine.operatorId, mine.venueId, 'meraki', [
      { type: 'heartbeat', timestamp: at(), payload: { status: 'ok', integration_id: ids.meraki } },
      { type: 'heartbeat', timestamp: at(), payload: { status: 'ok', integration_id: ids.theirs } },
      { type: 'heartbeat', timestamp: at(), payload: { status: 'ok', integration_id: ids.density } },
      { type: 'heartbeat', timestamp: at(), payload: { status: 'ok' } },
    ]);
    expect(res.result).toEqual({
      accepted: 2,
      rejected: 2,
      errors: [
        { index: 1, reason: `payload.integration_id '${ids.theirs}' is not an active meraki integration of this venue` },
        { index: 2, reason: `payload.integration_id '${ids.density}' is not an active meraki integration of this venue` },
      ],
    });
  });
});

describe('connector health', () => {
  it('grades each active integration from its last sign of life and its rejection rate, grouped by type and status', async () => {
    // With the two heartbeats refused above: 2 of 56 meraki events rejected (under 5%).
    const seen = Array.from({ length: 50 }, (_, i) => ({
      type: 'device_seen',
      timestamp: at(),
      payload: { clientMac: `3C:22:FB:1A:2B:${(16 + i).toString(16)}`, rssi: 40 },
    }));
    expect((await send(mine.operatorId, mine.venueId, 'meraki', seen)).result.accepted).toBe(50);
    const good = Array.from({ length: 10 }, () => ({
      type: 'entry',
      timestamp: at(),
      payload: { space_id: 'spc_1', doorway_id: 'drw_1', direction: 1, count: 3 },
    }));
    const bad = Array.from({ length: 15 }, () => ({ type: 'visit', timestamp: at(), payload: {} }));
    expect((await send(mine.operatorId, mine.venueId, 'density', [...good, ...bad])).result).toMatchObject({ accepted: 10, rejected: 15 });

    const groups = await waitFor('three graded integrations', async () => {
      const g = await connectorHealth(h, mine.operatorId);
      // A grading may fall between the two requests' reports (density still waiting): wait for both.
      const graded = (type: string, status: string) => g.connectors.some((c) => c.type === type && c.status === status);
      return g.connectors.length === 3 && graded('meraki', 'healthy') && graded('density', 'degraded') ? g : undefined;
    });
    expect(groups.connectors.map((c) => [c.type, c.status, c.count, c.lastEventAt === null])).toEqual([
      ['meraki', 'healthy', 1, false],
      ['density', 'degraded', 1, false],
      ['verkada', 'waiting', 1, true],
    ]);
    expect(Date.now() - Date.parse(groups.connectors[0]!.lastEventAt!)).toBeLessThan(60_000);
    const all = await changes();
    // Every integration had a first grading; each one's latest change is the grade shown.
    expect(new Set(all.filter((c) => c.previous === null).map((c) => c.integrationId))).toEqual(
      new Set([ids.meraki, ids.density, ids.verkada]),
    );
    const latest = (id: string | undefined) => all.filter((c) => c.integrationId === id).at(-1)!;
    expect([ids.meraki, ids.density, ids.verkada].map((id) => [id, latest(id).status])).toEqual([
      [ids.meraki, 'healthy'],
      [ids.density, 'degraded'],
      [ids.verkada, 'waiting'],
    ]);
    expect(latest(ids.density).rejectionRate).toBe(0.6);
  });

  it('emits a transition when an integration comes to life', async () => {
    expect(
      (
        await send(mine.operatorId, mine.venueId, 'verkada', [
          { type: 'heartbeat', timestamp: at(), payload: { integration_id: ids.verkada } },
        ])
      ).result.accepted,
    ).toBe(1);
    const change = await waitFor('verkada healthy', async () =>
      (await changes()).find((c) => c.integrationId === ids.verkada && c.status === 'healthy'),
    );
    expect(change).toMatchObject({ previous: 'waiting', connectorType: 'verkada', venueId: mine.venueId, operatorId: mine.operatorId });
  });

  it('shows each operator only its own integrations', async () => {
    const groups = await connectorHealth(h, theirs.operatorId);
    expect(groups.connectors).toEqual([{ type: 'meraki', status: 'waiting', count: 1, lastEventAt: null }]);
  });

  it('uses the documented thresholds', () => {
    const now = Date.now();
    expect(healthOf('meraki', now - 170_000, 100, 0, now).status).toBe('healthy');
    expect(healthOf('meraki', now - 190_000, 100, 0, now).status).toBe('degraded');
    expect(healthOf('meraki', now - 610_000, 100, 0, now).status).toBe('offline');
    expect(healthOf('verkada', now - 40 * 60_000, 0, 0, now).status).toBe('healthy');
    expect(healthOf('meraki', now, 95, 5, now).status).toBe('degraded');
    expect(healthOf('meraki', now, 10, 5, now).status).toBe('healthy');
    expect(healthOf('meraki', null, 0, 0, now).status).toBe('offline');
    // A new integration: waiting (no alarm) for its first 10 intervals, then offline.
    expect(healthOf('meraki', null, 0, 0, now, undefined, now - 9 * 60_000)).toEqual({
      status: 'waiting',
      rate: 0,
      reason: 'waiting for its first data (created 540 s ago)',
    });
    expect(healthOf('meraki', null, 0, 0, now, undefined, now - 11 * 60_000).status).toBe('offline');
    expect(healthOf('verkada', null, 0, 0, now, undefined, now - 2 * 3_600_000).status).toBe('waiting');
  });
});

describe('health from the vendor link', () => {
  const link = (over: Partial<LinkRecord>): LinkRecord => ({
    link: 'poll',
    okAt: null,
    error: null,
    failures: 0,
    taken: 0,
    failed: 0,
    ...over,
  });

  it('names the vendor error once a link failed three times in a row, and recovers on the next success', async () => {
    const unifi = await integration(theirs.venueId, 'unifi');
    const integrationRef = {
      id: unifi,
      venueId: theirs.venueId,
      connectorType: 'unifi' as const,
      operator: { id: theirs.operatorId, plan: 'pro' as const, billingAnchor: new Date() },
    };
    const reports = { publisher, reportsTopic: h.derived.ingestReports, log: h.log };
    // A poll that answered, then a controller refusing the login.
    await reportSourceOutcome(reports, integrationRef, { link: 'poll', ok: true });
    const error = 'controller answered 401 to login: check username and password';
    for (let i = 0; i < 3; i++) await reportSourceOutcome(reports, integrationRef, { link: 'poll', ok: false, error });
    const degraded = await waitFor('unifi degraded', async () =>
      (await changes()).find((c) => c.integrationId === unifi && c.status === 'degraded'),
    );
    expect(degraded.reason).toBe(`polls failing (3 in a row): ${error}`);
    expect(degraded.operatorId).toBe(theirs.operatorId);
    const groups = await connectorHealth(h, theirs.operatorId);
    expect(groups.connectors).toContainEqual(expect.objectContaining({ type: 'unifi', status: 'degraded', count: 1 }));
    // Another operator sees nothing of it.
    expect((await connectorHealth(h, mine.operatorId)).connectors.some((c) => c.type === 'unifi')).toBe(false);

    await reportSourceOutcome(reports, integrationRef, { link: 'poll', ok: true });
    const healthy = await waitFor('unifi healthy again', async () =>
      (await changes()).find((c) => c.integrationId === unifi && c.status === 'healthy' && c.previous === 'degraded'),
    );
    expect(healthy.reason).toBe('ok');
  });

  it('counts a working link as a sign of life and grades refused shares and silence with the last error', () => {
    const now = Date.now();
    // A quiet site: the poll answers, no events.
    expect(healthOf('unifi', null, 0, 0, now, link({ okAt: now - 30_000 })).status).toBe('healthy');
    expect(healthOf('unifi', null, 0, 0, now, link({ failures: 2, error: 'timed out after 10 s' }))).toEqual({
      status: 'offline',
      rate: 0,
      reason: 'nothing received yet; last poll error: timed out after 10 s',
    });
    expect(healthOf('unifi', now, 0, 0, now, link({ okAt: now - 60_000, failures: 2, error: 'x' })).status).toBe('healthy');
    // A new integration with a wrong password shows it within its grace.
    expect(healthOf('unifi', null, 0, 0, now, link({ failures: 3, error: 'login refused' }), now - 60_000).reason).toBe(
      'polls failing (3 in a row): login refused',
    );
    expect(
      healthOf('meraki', now, 50, 0, now, link({ link: 'webhook', okAt: now, failures: 3, error: 'secret does not match' })).reason,
    ).toBe('webhook deliveries refused (3 in a row): secret does not match');
    // One AP of twenty posting with an old secret.
    expect(
      healthOf(
        'meraki',
        now,
        500,
        0,
        now,
        link({ link: 'webhook', okAt: now, taken: 19, failed: 1, error: 'secret does not match', failures: 1 }),
      ).reason,
    ).toBe('5% of webhook deliveries failed; last delivery error: secret does not match');
    // Silence beats a stale error, and keeps it in the reason.
    expect(healthOf('unifi', now - 20 * 60_000, 0, 0, now, link({ okAt: now - 20 * 60_000, failures: 1, error: 'HTTP 502' })).reason).toBe(
      'silent for 1200 s; last poll error: HTTP 502',
    );
  });
});
