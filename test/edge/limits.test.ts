import { randomUUID } from 'node:crypto';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { newOperator, newVenue } from '../support/tenants.js';
import { request } from '../support/http.js';
import { decodeEventMessage, encodeEventMessages, type DecodedEvent } from '../../lib/events/wire.js';
import { STREAM_SOURCES, type StreamSource } from '../../apps/edge/sources.js';
import { Client, freePort, ingestDensity, sleep, startTestEdge, type TestEdge } from './support.js';
import { tcpProxy } from '../support/tcp-proxy.js';
import { createMissingTopics } from '../../lib/topology.js';

let api: RunningApi;
let edge: TestEdge;
const clients: Client[] = [];
const edges: TestEdge[] = [];

const track = (c: Client) => (clients.push(c), c);
const extraEdge = async (overrides: Parameters<typeof startTestEdge>[0] = {}, opts: Parameters<typeof startTestEdge>[1] = {}) => {
  const e = await startTestEdge(overrides, opts);
  edges.push(e);
  return e;
};

/** Opens a connection expected to be refused: an error message, then the close code and reason. */
async function refused(url: string, token?: string): Promise<{ code: number; reason: string; error: unknown }> {
  const c = track(await Client.open(url, token));
  const { code, reason } = await c.waitClose();
  return { code, reason, error: c.messages[0] };
}

beforeAll(async () => {
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  edge = await startTestEdge({ WS_KEY_RECHECK_MS: '500' });
});

afterEach(async () => {
  while (clients.length) clients.pop()!.close();
  while (edges.length) await edges.pop()!.close();
  // Closed connections release their leases asynchronously.
  await sleep(200);
});

afterAll(async () => {
  await edge?.close();
  await api?.close();
});

describe('refusals a browser can read: accepted, then an error message and a 4xxx close', () => {
  it.each([
    ['no token', undefined],
    ['an empty token', ''],
    ['a token that is not a key', 'hello'],
    ['an unknown key', 'vt_live_' + 'A'.repeat(28)],
  ])('%s → 4001 UNAUTHORIZED', async (_name, token) => {
    const r = await refused(edge.url, token);
    expect(r.code).toBe(4001);
    expect(r.reason).toMatch(/^UNAUTHORIZED: /);
    expect(r.error).toEqual({ type: 'error', errorCode: 'UNAUTHORIZED', errorMsg: expect.any(String) });
  });

  it('refuses a rotated key, and takes the new one', async () => {
    const op = await newOperator(api);
    const rotated = await request(`${api.url}/api/keys/rotate`, { key: op.key, method: 'POST' });
    expect(rotated.status).toBe(200);
    const r = await refused(edge.url, op.key);
    expect(r.code).toBe(4001);
    expect(r.reason).toContain('rotated');
    track(await Client.connected(edge.url, rotated.body.api_key));
  });

  it('closes the live connections of a key within seconds of its rotation, and no one else', async () => {
    const op = await newOperator(api);
    const other = await newOperator(api);
    const live = [track(await Client.connected(edge.url, op.key)), track(await Client.connected(edge.url, op.key))];
    const bystander = track(await Client.connected(edge.url, other.key));
    const rotatedAt = Date.now();
    const rotated = await request(`${api.url}/api/keys/rotate`, { key: op.key, method: 'POST' });
    expect(rotated.status).toBe(200);
    for (const c of live) {
      const closed = await c.waitClose(10_000);
      expect(closed.code).toBe(4001);
      expect(closed.reason).toMatch(/^UNAUTHORIZED: .*rotated/);
    }
    // Re-checked every WS_KEY_RECHECK_MS (500 ms here; 5 s by default).
    expect(Date.now() - rotatedAt).toBeLessThan(5000);
    expect(bystander.closed).toBeNull();
    track(await Client.connected(edge.url, rotated.body.api_key));
  });

  it('refuses with 4103 SERVICE_UNAVAILABLE when the edge cannot check keys', async () => {
    const down = new URL(testConfig().DATABASE_URL);
    down.port = String(await freePort());
    const blind = await extraEdge({ DATABASE_URL: down.toString() });
    const op = await newOperator(api);
    const r = await refused(blind.url, op.key);
    expect(r.code).toBe(4103);
    expect(r.reason).toMatch(/^SERVICE_UNAVAILABLE: /);
    expect(r.error).toMatchObject({ type: 'error', errorCode: 'SERVICE_UNAVAILABLE' });
  });
});

describe('shutting down while a connection is being admitted', () => {
  it('waits for the admission, then closes that connection with 1001 and gives its place back', async () => {
    const pg = await tcpProxy(testConfig().DATABASE_URL);
    try {
      const stopping = await extraEdge({ DATABASE_URL: pg.url });
      const op = await newOperator(api);
      (await Client.connected(stopping.url, op.key)).ws.close(1000);
      // The key check waits on Postgres while the edge is told to stop.
      pg.hold();
      const late = track(await Client.open(stopping.url, op.key));
      let closed = false;
      const closing = stopping.close().then(() => (closed = true));
      await sleep(500);
      expect(closed).toBe(false);
      expect(late.closed).toBeNull();
      pg.release();
      await closing;
      expect((await late.waitClose()).code).toBe(1001);
      expect(late.messages).toEqual([{ type: 'error', errorCode: 'SERVICE_UNAVAILABLE', errorMsg: 'server shutting down; reconnect now' }]);
      // Its lease was given back: the operator still has all ten places.
      for (let i = 0; i < 10; i++) track(await Client.connected(edge.url, op.key));
    } finally {
      await pg.close();
    }
  });
});

describe('10 concurrent connections per operator', () => {
  it('refuses the eleventh across two edge instances with 4129 RATE_LIMITED; a closed one frees its place', async () => {
    const second = await extraEdge();
    const op = await newOperator(api);
    const other = await newOperator(api);
    const open: Client[] = [];
    for (let i = 0; i < 10; i++) open.push(track(await Client.connected(i % 2 ? second.url : edge.url, op.key)));
    for (const url of [edge.url, second.url]) {
      const r = await refused(url, op.key);
      expect(r.code).toBe(4129);
      expect(r.reason).toMatch(/^RATE_LIMITED: at most 10 concurrent connections/);
      expect(r.error).toMatchObject({ type: 'error', errorCode: 'RATE_LIMITED' });
    }
    // Refusals took no place, and other operators are not affected.
    track(await Client.connected(second.url, other.key));
    expect(open.every((c) => c.closed === null)).toBe(true);

    open[0]!.ws.close(1000);
    await open[0]!.waitClose();
    const deadline = Date.now() + 5000;
    let replacement: Client | undefined;
    while (!replacement && Date.now() < deadline) {
      const c = track(await Client.open(second.url, op.key));
      const first = await c.next(() => true);
      if (first.type === 'connected') replacement = c;
      else await sleep(100);
    }
    expect(replacement).toBeDefined();
    expect((await refused(edge.url, op.key)).code).toBe(4129);
  });

  it('still holds per instance while Redis is unreachable', async () => {
    const down = new URL(testConfig().REDIS_URL);
    down.port = String(await freePort());
    const isolated = await extraEdge({ REDIS_URL: down.toString() });
    const op = await newOperator(api);
    for (let i = 0; i < 10; i++) track(await Client.connected(isolated.url, op.key));
    expect((await refused(isolated.url, op.key)).code).toBe(4129);
    const health = await request(isolated.url.replace('ws://', 'http://').replace('/ws', '/health'));
    expect(health.body.websocket).toMatchObject({ connections: 10, operators: 1, redis: 'local-fallback' });
  });
});

describe('stream sources and scale-out', () => {
  it('pushes from every topic in the source list, each with its own eventType', async () => {
    const op = await newOperator(api, 'pro');
    const venue = (await newVenue(api, op.key)).id;
    const cfg = testConfig();
    const extraTopic = `${cfg.KAFKA_TOPIC_PREFIX}.edge-test-source.v1`;
    const kafka = new Kafka({ brokers: cfg.KAFKA_BROKERS, clientId: 'edge-test', logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    await createMissingTopics(admin, [{ topic: extraTopic, numPartitions: 2 }]);
    await admin.disconnect();
    // A second source shaped like the coming occupancy-update topic: one entry in the list.
    const extra: StreamSource<DecodedEvent[]> = {
      name: 'test-updates',
      topic: () => extraTopic,
      decode: decodeEventMessage,
      toItems: (decoded) =>
        decoded.flatMap(({ event: e }) =>
          e
            ? [
                {
                  operatorId: e.operatorId,
                  venueId: e.venueId,
                  eventType: 'occupancy-update-test',
                  metrics: e.metrics,
                  time: new Date(e.ts).toISOString(),
                },
              ]
            : [],
        ),
    };
    const multi = await extraEdge({}, { sources: [...STREAM_SOURCES, extra] });
    const c = track(await Client.connected(multi.url, op.key));
    await c.subscribe(1, venue, ['occupancy']);
    const producer = kafka.producer();
    await producer.connect();
    const now = Date.now();
    await producer.send({
      topic: extraTopic,
      messages: [
        {
          key: venue,
          ...encodeEventMessages([
            {
              id: randomUUID(),
              operatorId: op.id,
              venueId: venue,
              zoneId: null,
              connectorType: 'density',
              type: 'occupancy',
              ts: now,
              receivedAt: now,
              device: null,
              randomizedMac: false,
              metrics: { occupancy: 12 },
              payload: {},
            },
          ])[0]!,
        },
      ],
    });
    await producer.disconnect();
    await ingestDensity(api, op.key, venue, [{ type: 'occupancy', count: 11 }]);
    await c.next((m) => m.data?.eventType === 'occupancy');
    const update = await c.next((m) => m.data?.eventType === 'occupancy-update-test');
    expect(update).toEqual({
      cmdId: 1,
      data: { venueId: venue, eventType: 'occupancy-update-test', metrics: { occupancy: 12 }, time: new Date(now).toISOString() },
    });
    const health = await request(multi.url.replace('ws://', 'http://').replace('/ws', '/health'));
    expect(health.body.kafka.sources.map((s: { name: string; ready: boolean }) => [s.name, s.ready])).toEqual([
      ['events', true],
      ['occupancy', true],
      ['alarms', true],
      ['test-updates', true],
    ]);
  });

  it('delivers from every edge instance: each sees every partition', async () => {
    const second = await extraEdge();
    const op = await newOperator(api, 'pro');
    // One venue per partition of the events topic (venues are the message keys).
    const partitionOf = Partitioners.DefaultPartitioner();
    const partitions = Array.from({ length: edge.cfg.KAFKA_PARTITIONS }, (_, i) => ({ partitionId: i, leader: 0 }));
    const byPartition = new Map<number, string>();
    while (byPartition.size < partitions.length) {
      const v = (await newVenue(api, op.key)).id;
      const p = partitionOf({ topic: 'events', partitionMetadata: partitions as never, message: { key: v, value: null } });
      if (!byPartition.has(p)) byPartition.set(p, v);
    }
    const venues = [...byPartition.values()];
    const onFirst = track(await Client.connected(edge.url, op.key));
    const onSecond = track(await Client.connected(second.url, op.key));
    for (const [i, v] of venues.entries()) {
      await onFirst.subscribe(i, v, ['entries']);
      await onSecond.subscribe(i, v, ['entries']);
    }
    for (const v of venues) await ingestDensity(api, op.key, v, [{ type: 'entry' }]);
    for (const c of [onFirst, onSecond]) {
      for (let i = 0; i < venues.length; i++) await c.next((m) => m.cmdId === i && m.data);
    }
  });
});

describe('backpressure, pings and health', () => {
  it('closes a client that stops reading with 4108 SLOW_CONSUMER, after delivering everything before it in order', async () => {
    const slowEdge = await extraEdge({ WS_MAX_BUFFERED_BYTES: String(64 * 1024) });
    const op = await newOperator(api, 'pro');
    const venue = (await newVenue(api, op.key)).id;
    const slow = track(await Client.connected(slowEdge.url, op.key));
    const healthy = track(await Client.connected(slowEdge.url, op.key));
    // 100 subscriptions multiply each event by 100 pushes, so the socket buffers fill quickly.
    const subs = Array.from({ length: 100 }, (_, i) => ({ cmdId: i, entityId: venue, keys: ['occupancy'] }));
    slow.send({ tsSubCmds: subs });
    await slow.next((m) => m.cmdId === 99 && m.type === 'subscribed');
    await healthy.subscribe(1, venue, ['occupancy']);
    slow.ws.pause();

    // Load straight onto the topic: far more than ingest's rate limits would let through quickly.
    const kafka = new Kafka({ brokers: slowEdge.cfg.KAFKA_BROKERS, clientId: 'edge-test', logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    const total = 3000;
    const now = Date.now();
    for (let start = 0; start < total; start += 500) {
      const messages = Array.from({ length: 500 }, (_, j) => ({
        key: venue,
        ...encodeEventMessages([
          {
            id: randomUUID(),
            operatorId: op.id,
            venueId: venue,
            zoneId: null,
            connectorType: 'density',
            type: 'occupancy',
            ts: now - 1000,
            receivedAt: now,
            device: null,
            randomizedMac: false,
            metrics: { occupancy: start + j },
            payload: {},
          },
        ])[0]!,
      }));
      await producer.send({ topic: `${slowEdge.cfg.KAFKA_TOPIC_PREFIX}.events.v1`, messages });
    }
    await producer.disconnect();

    await healthy.next((m) => m.data?.metrics.occupancy === total - 1, 30_000);
    expect(healthy.pushes().map((m) => m.data.metrics.occupancy)).toEqual(Array.from({ length: total }, (_, i) => i));
    expect(healthy.closed).toBeNull();

    slow.ws.resume();
    const closed = await slow.waitClose(30_000);
    expect(closed.code).toBe(4108);
    expect(closed.reason).toMatch(/^SLOW_CONSUMER: more than 65536 bytes unread/);
    // What arrived is complete and in order for every subscription: nothing skipped before the close.
    const received = slow.pushes();
    expect(received.length).toBeGreaterThan(0);
    expect(received.length).toBeLessThan(total * 100);
    for (let cmdId = 0; cmdId < 100; cmdId++) {
      const seq = received.filter((m) => m.cmdId === cmdId).map((m) => m.data.metrics.occupancy);
      expect(seq).toEqual(Array.from({ length: seq.length }, (_, i) => i));
    }
    const health = await request(slowEdge.url.replace('ws://', 'http://').replace('/ws', '/health'));
    expect(health.body.websocket.closedSlow).toBe(1);
  });

  it('pings an idle connection, which stays open while it answers', async () => {
    const pinging = await extraEdge({ WS_IDLE_TIMEOUT_S: '8' });
    const op = await newOperator(api);
    const c = track(await Client.connected(pinging.url, op.key));
    await sleep(14_000);
    expect(c.pings.length).toBeGreaterThan(0);
    expect(c.closed).toBeNull();
  });

  it('closes a connection that answers nothing, and frees its place', async () => {
    const pinging = await extraEdge({ WS_IDLE_TIMEOUT_S: '8' });
    const op = await newOperator(api);
    const health = pinging.url.replace('ws://', 'http://').replace('/ws', '/health');
    const dead = track(await Client.connected(pinging.url, op.key));
    track(await Client.connected(pinging.url, op.key));
    // A paused client reads nothing, so it never answers the ping: as good as gone.
    dead.ws.pause();
    const deadline = Date.now() + 40_000;
    let ws = (await request(health)).body.websocket;
    while (ws.connections > 1 && Date.now() < deadline) {
      await sleep(500);
      ws = (await request(health)).body.websocket;
    }
    expect(ws).toMatchObject({ connections: 1, leases: 1 });
  });

  it('reports connections, operators and subscriptions on /health', async () => {
    const own = await extraEdge();
    const a = await newOperator(api, 'pro');
    const b = await newOperator(api);
    const venue = (await newVenue(api, a.key)).id;
    const c = track(await Client.connected(own.url, a.key));
    track(await Client.connected(own.url, a.key));
    track(await Client.connected(own.url, b.key));
    await c.subscribe(1, venue, ['occupancy']);
    await ingestDensity(api, a.key, venue, [{ type: 'occupancy', count: 3 }]);
    await c.next((m) => m.data);
    const health = await request(own.url.replace('ws://', 'http://').replace('/ws', '/health'));
    expect(health.status).toBe(200);
    expect(health.body.status).toBe('healthy');
    expect(health.body.websocket).toMatchObject({ connections: 3, operators: 2, subscriptions: 1, leases: 3, redis: 'shared' });
    expect(health.body.kafka.sources).toEqual([
      expect.objectContaining({ name: 'events', ready: true, undecodable: 0 }),
      expect.objectContaining({ name: 'occupancy', ready: true }),
      expect.objectContaining({ name: 'alarms', ready: true }),
    ]);
    expect(health.body.kafka.sources[0].messagesTailed).toBeGreaterThan(0);
  });
});
