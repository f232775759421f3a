/**
 * The connector health processor driven by hand, without engines: ingest reports in, the timer on
 * a chosen wall clock, a fake venue look-up holding the venue's integrations.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  decodeConnectorHealthChange,
  encodeIngestReport,
  type ConnectorHealthChange,
  type IngestReport,
} from '../../../lib/events/derived.js';
import { createHealthProcessor, SNAPSHOT_EVERY_MS, type HealthState } from '../../../pipeline/processors/health.js';
import type { InputMessage } from '../../../pipeline/processors/processor.js';
import { Driver, FakeVenues, venueInfo } from './fakes.js';

const MINUTE = 60_000;
const T0 = Date.UTC(2026, 2, 10, 12);

function setup() {
  const operatorId = randomUUID();
  const venueId = randomUUID();
  const venues = new FakeVenues();
  venues.venues.set(venueId, venueInfo(operatorId));
  const driver = new Driver<HealthState, ConnectorHealthChange>(
    createHealthProcessor({ venues, reportsTopic: 'reports', outputTopic: 'health' }),
    decodeConnectorHealthChange,
  );
  /** An active integration of the venue, created at `createdAt` (the look-up reads it afresh). */
  const integration = async (type: string, createdAt: number): Promise<string> => {
    const id = randomUUID();
    venues.venues.get(venueId)!.integrations.push({ id, connector_type: type, created_at: new Date(createdAt).toISOString() });
    await venues.refresh(venueId);
    return id;
  };
  let offset = 0;
  const report = (ts: number, r: Partial<IngestReport>): InputMessage => ({
    topic: 'reports',
    partition: 0,
    offset: String(offset++),
    value: encodeIngestReport({ operatorId, venueId, connectorType: 'meraki', accepted: 0, rejected: 0, ts, ...r }),
  });
  return { operatorId, venueId, venues, driver, integration, report };
}

const statuses = (changes: ConnectorHealthChange[]) => changes.map((c) => [c.integrationId, c.previous, c.status, c.reason]);

describe('connector health transitions', () => {
  it('waits for a new integration, is healthy at its first data, then degraded and offline as it falls silent', async () => {
    const { driver, integration, report } = setup();
    const density = await integration('density', T0);
    // Only venues heard from are evaluated: another connector's report makes this one heard.
    await driver.process([report(T0, { connectorType: 'meraki', accepted: 1 })], T0);
    expect(statuses(await driver.tick(T0 + MINUTE))).toEqual([[density, null, 'waiting', 'waiting for its first data (created 60 s ago)']]);
    expect(await driver.tick(T0 + 2 * MINUTE)).toEqual([]);
    await driver.process([report(T0 + 2 * MINUTE, { connectorType: 'density', accepted: 3 })], T0 + 2 * MINUTE);
    const [healthy] = await driver.tick(T0 + 2 * MINUTE);
    expect(healthy).toMatchObject({
      integrationId: density,
      connectorType: 'density',
      previous: 'waiting',
      status: 'healthy',
      lastEventAt: T0 + 2 * MINUTE,
      rejectionRate: 0,
      reason: 'ok',
    });
    // Density is expected every 5 minutes: silent for more than 3 intervals degraded, more than 10 offline.
    expect(await driver.tick(T0 + 17 * MINUTE)).toEqual([]);
    expect(statuses(await driver.tick(T0 + 18 * MINUTE))).toEqual([[density, 'healthy', 'degraded', 'silent for 960 s']]);
    expect(statuses(await driver.tick(T0 + 53 * MINUTE))).toEqual([[density, 'degraded', 'offline', 'silent for 3060 s']]);
  });

  it('calls an integration never heard from offline once its grace has passed', async () => {
    const { driver, integration, report } = setup();
    const meraki = await integration('meraki', T0 - 11 * MINUTE);
    await driver.process([report(T0, { connectorType: 'density', accepted: 1 })], T0);
    expect(statuses(await driver.tick(T0))).toEqual([[meraki, null, 'offline', 'nothing received yet']]);
  });

  it('is degraded after three failed polls in a row, naming the vendor’s error, and healthy again at the next success', async () => {
    const { driver, integration, report } = setup();
    const meraki = await integration('meraki', T0 - 60 * MINUTE);
    const poll = (ts: number, ok: boolean) =>
      report(ts, { source: { integrationId: meraki, link: 'poll', ok, ...(ok ? {} : { error: 'timed out after 10 s' }) } });
    // A poll that answers is a sign of life even without events.
    await driver.process([poll(T0, true)], T0);
    expect(statuses(await driver.tick(T0))).toEqual([[meraki, null, 'healthy', 'ok']]);
    await driver.process([poll(T0 + 10_000, false), poll(T0 + 20_000, false)], T0 + 20_000);
    expect(await driver.tick(T0 + 20_000)).toEqual([]);
    await driver.process([poll(T0 + 30_000, false)], T0 + 30_000);
    expect(statuses(await driver.tick(T0 + 30_000))).toEqual([
      [meraki, 'healthy', 'degraded', 'polls failing (3 in a row): timed out after 10 s'],
    ]);
    await driver.process([poll(T0 + 40_000, true)], T0 + 40_000);
    expect(statuses(await driver.tick(T0 + 40_000))).toEqual([[meraki, 'degraded', 'healthy', 'ok']]);
  });

  it('is degraded when 5 % of at least 20 submitted events were rejected over the last 15 minutes', async () => {
    const { driver, integration, report } = setup();
    const meraki = await integration('meraki', T0 - 60 * MINUTE);
    await driver.process([report(T0, { accepted: 19, rejected: 1 })], T0);
    const [c] = await driver.tick(T0);
    expect(c).toMatchObject({ integrationId: meraki, status: 'degraded', rejectionRate: 0.05, reason: '5% of events rejected' });
    // The rejections leave the window; the connector kept sending.
    await driver.process([report(T0 + 16 * MINUTE, { accepted: 1 })], T0 + 16 * MINUTE);
    expect(statuses(await driver.tick(T0 + 16 * MINUTE))).toEqual([[meraki, 'degraded', 'healthy', 'ok']]);
  });
});

describe('the timer', () => {
  it('does nothing before the processor is caught up, then snapshots a stable integration hourly', async () => {
    const { driver, integration, report } = setup();
    const meraki = await integration('meraki', T0 - 60 * MINUTE);
    await driver.process([report(T0, { accepted: 5 })], T0);
    expect(await driver.tick(T0, false)).toEqual([]);
    expect(statuses(await driver.tick(T0))).toEqual([[meraki, null, 'healthy', 'ok']]);
    for (let t = T0 + MINUTE; t < T0 + SNAPSHOT_EVERY_MS; t += 10 * MINUTE) {
      await driver.process([report(t, { accepted: 1 })], t);
      expect(await driver.tick(t)).toEqual([]);
    }
    const t = T0 + SNAPSHOT_EVERY_MS;
    await driver.process([report(t, { accepted: 1 })], t);
    expect(statuses(await driver.tick(t))).toEqual([[meraki, 'healthy', 'healthy', 'ok']]);
  });

  it('forgets an integration deleted since, with its link', async () => {
    const { driver, integration, report, venues, venueId } = setup();
    const meraki = await integration('meraki', T0 - 60 * MINUTE);
    await driver.process([report(T0, { accepted: 1, source: { integrationId: meraki, link: 'webhook', ok: true } })], T0);
    await driver.tick(T0);
    venues.venues.get(venueId)!.integrations = [];
    await venues.refresh(venueId);
    const before = driver.changelog.length;
    expect(await driver.tick(T0 + MINUTE)).toEqual([]);
    expect(driver.changelog.slice(before)).toEqual(
      expect.arrayContaining([
        [`i|${meraki}`, null],
        [`l|${meraki}`, null],
      ]),
    );
  });
});

describe('restore from the changelog', () => {
  it('goes on from a restored state exactly as from the live one', async () => {
    const { driver, integration, report } = setup();
    const meraki = await integration('meraki', T0 - 60 * MINUTE);
    await integration('density', T0);
    const poll = (ts: number, ok: boolean) =>
      report(ts, { accepted: ok ? 2 : 0, source: { integrationId: meraki, link: 'poll', ok, ...(ok ? {} : { error: 'login refused' }) } });
    await driver.process([poll(T0, true), poll(T0 + 10_000, false), report(T0 + 10_000, { accepted: 10, rejected: 1 })], T0 + 10_000);
    await driver.tick(T0 + 10_000);
    const restored = new Driver(driver.proc, decodeConnectorHealthChange);
    restored.state = driver.restored();
    const more = [poll(T0 + 20_000, false), poll(T0 + 30_000, false), report(T0 + 40_000, { connectorType: 'density', accepted: 1 })];
    for (const d of [driver, restored]) await d.process(more, T0 + 40_000);
    for (const t of [T0 + 40_000, T0 + 20 * MINUTE, T0 + 2 * SNAPSHOT_EVERY_MS]) {
      expect(await restored.tick(t)).toEqual(await driver.tick(t));
    }
    expect(driver.outputs.length).toBeGreaterThan(restored.outputs.length);
    expect(statuses(restored.outputs.slice(0, 1))).toEqual([[meraki, 'healthy', 'degraded', 'polls failing (3 in a row): login refused']]);
  });
});
