import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { alarmTopicName, derivedTopicNames } from '../../lib/topology.js';
import { encodeAlarmEvent } from '../../lib/events/alarms.js';
import { encodeOccupancyUpdate, type OccupancyUpdate } from '../../lib/events/derived.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { Client, startTestEdge, type TestEdge } from './support.js';

/** The computed occupancy updates of the stream processors reach subscribers as `eventType: "occupancy"` with a `zoneId`. */
let api: RunningApi;
let edge: TestEdge;
let producer: Producer;
let a: TestOperator;
let b: TestOperator;
beforeAll(async () => {
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  edge = await startTestEdge();
  producer = new Kafka({ brokers: api.services.cfg.KAFKA_BROKERS, clientId: 'edge-occupancy-test', logLevel: logLevel.NOTHING }).producer();
  await producer.connect();
  [a, b] = await Promise.all([newOperator(api, 'pro'), newOperator(api, 'pro')]);
});
afterAll(async () => {
  await producer.disconnect();
  await edge.close();
  await api.close();
});

const update = (op: TestOperator, venueId: string, zoneId: string | null, value: number, ts: number): OccupancyUpdate => ({
  operatorId: op.id,
  venueId,
  zoneId,
  value,
  capacity: zoneId ? 40 : null,
  percent: zoneId ? (value / 40) * 100 : null,
  ts,
  reason: 'flow',
  clamped: 0,
});

describe('computed occupancy over /ws', () => {
  it('pushes venue and zone figures to the venue’s subscribers only, restricted to the occupancy key', async () => {
    const venue = (await newVenue(api, a.key)).id;
    const other = (await newVenue(api, b.key)).id;
    const zone = '2f1c5b6e-0f4d-4a57-9a43-1d0a6f1b2c3d';
    const watcher = await Client.connected(edge.url, a.key);
    await watcher.subscribe(7, venue, ['occupancy']);
    const temperatureOnly = await Client.connected(edge.url, a.key);
    await temperatureOnly.subscribe(1, venue, ['temperature']);
    const ts = Date.now();
    const topic = derivedTopicNames(api.services.cfg.KAFKA_TOPIC_PREFIX).occupancy;
    await producer.send({
      topic,
      messages: [
        { key: venue, value: encodeOccupancyUpdate(update(a, venue, null, 12, ts)) },
        { key: venue, value: encodeOccupancyUpdate(update(a, venue, zone, 5, ts)) },
        // Another operator's venue, and an update claiming this venue for another operator: never delivered.
        { key: other, value: encodeOccupancyUpdate(update(b, other, null, 99, ts)) },
        { key: venue, value: encodeOccupancyUpdate(update(b, venue, null, 98, ts)) },
      ],
    });
    await watcher.next((m) => m.data?.zoneId === zone);
    expect(watcher.pushes(7)).toEqual([
      {
        cmdId: 7,
        data: { venueId: venue, zoneId: null, eventType: 'occupancy', metrics: { occupancy: 12 }, time: new Date(ts).toISOString() },
      },
      {
        cmdId: 7,
        data: { venueId: venue, zoneId: zone, eventType: 'occupancy', metrics: { occupancy: 5 }, time: new Date(ts).toISOString() },
      },
    ]);
    expect(temperatureOnly.pushes()).toEqual([]);
    watcher.close();
    temperatureOnly.close();
  });
});

describe('alarm events over /ws', () => {
  it('pushes every alarm event of the venue to all its subscribers, whatever their keys, and to no one else', async () => {
    const venue = (await newVenue(api, a.key)).id;
    const watcher = await Client.connected(edge.url, a.key);
    await watcher.subscribe(3, venue, ['temperature']);
    const outsider = await Client.connected(edge.url, b.key);
    await outsider.subscribe(4, (await newVenue(api, b.key)).id, ['temperature']);
    const now = new Date().toISOString();
    const alarm = {
      id: '6a1f8e52-1b7e-4b59-8d2a-3c4d5e6f7a8b',
      venueId: venue,
      zoneId: '2f1c5b6e-0f4d-4a57-9a43-1d0a6f1b2c3d',
      integrationId: null,
      type: 'zone_occupancy_high',
      severity: 'MAJOR' as const,
      status: 'ACTIVE_UNACK' as const,
      message: 'Floor at 92 % of capacity',
      details: { current: 46, capacity: 50, percent: 92, threshold: 90 },
      createdAt: now,
      updatedAt: now,
      acknowledgedAt: null,
      clearedAt: null,
    };
    const ts = Date.now();
    await producer.send({
      topic: alarmTopicName(api.services.cfg.KAFKA_TOPIC_PREFIX),
      messages: [
        {
          key: venue,
          value: encodeAlarmEvent({
            id: 'a9c1e7d2-4f5b-4c6a-8e9f-0a1b2c3d4e5f',
            kind: 'created',
            cause: 'rule',
            operatorId: a.id,
            venueId: venue,
            previousSeverity: null,
            ts,
            alarm,
          }),
        },
      ],
    });
    const push = await watcher.next((m) => m.data?.eventType === 'alarm');
    expect(push).toEqual({
      cmdId: 3,
      data: {
        venueId: venue,
        eventType: 'alarm',
        metrics: {},
        alarm: { ...alarm, kind: 'created', previousSeverity: null },
        time: new Date(ts).toISOString(),
      },
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(outsider.pushes()).toEqual([]);
    watcher.close();
    outsider.close();
  });
});
