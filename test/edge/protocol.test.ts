import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { request } from '../support/http.js';
import { HARD_FRAME_FACTOR } from '../../apps/edge/server.js';
import { Client, ingestDensity, ingestEnvironment, sleep, startTestEdge, type TestEdge } from './support.js';

let api: RunningApi;
let edge: TestEdge;
let alice: TestOperator;
let bob: TestOperator;
let aliceVenue: string;
let aliceOther: string;
let bobVenue: string;
const clients: Client[] = [];

const open = async (key: string) => {
  const c = await Client.connected(edge.url, key);
  clients.push(c);
  return c;
};

beforeAll(async () => {
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  edge = await startTestEdge();
  alice = await newOperator(api, 'pro');
  bob = await newOperator(api, 'pro');
  aliceVenue = (await newVenue(api, alice.key)).id;
  aliceOther = (await newVenue(api, alice.key)).id;
  bobVenue = (await newVenue(api, bob.key)).id;
});

afterEach(() => {
  while (clients.length) clients.pop()!.close();
});

afterAll(async () => {
  await edge?.close();
  await api?.close();
});

describe('connecting', () => {
  it('greets with {type:"connected", operatorId, timestamp}', async () => {
    const before = Date.now();
    const c = await open(alice.key);
    const hello = c.messages[0];
    expect(Object.keys(hello).sort()).toEqual(['operatorId', 'timestamp', 'type']);
    expect(hello.operatorId).toBe(alice.id);
    expect(new Date(hello.timestamp).toISOString()).toBe(hello.timestamp);
    expect(Date.parse(hello.timestamp)).toBeGreaterThanOrEqual(before - 1000);
  });

  it('answers frames sent before `connected` after it; a refused key gets no answer to them', async () => {
    // The key is checked once the socket is open: frames sent at once wait for the admission.
    const early = await Client.open(edge.url, alice.key);
    clients.push(early);
    early.send({ tsSubCmds: [{ cmdId: 1, entityId: aliceVenue, keys: ['entries'] }] });
    early.ws.send(Buffer.from('binary'));
    early.send({ tsSubCmds: [{ cmdId: 2, entityId: bobVenue, keys: ['entries'] }] });
    await early.next((m) => m.cmdId === 2);
    const [first, ...rest] = early.messages.map((m) => m.type ?? m.errorCode);
    // A frame refused at once (binary) is answered at once, not after the commands before it.
    expect({ first, rest: rest.sort() }).toEqual({ first: 'connected', rest: ['FORBIDDEN', 'VALIDATION_ERROR', 'subscribed'] });

    const refused = await Client.open(edge.url, 'vt_live_' + 'Z'.repeat(28));
    clients.push(refused);
    refused.send({ tsSubCmds: [{ cmdId: 1, entityId: aliceVenue, keys: ['entries'] }] });
    expect((await refused.waitClose()).code).toBe(4001);
    expect(refused.messages).toEqual([{ type: 'error', errorCode: 'UNAUTHORIZED', errorMsg: expect.any(String) }]);
  });

  it('takes as many frames before `connected` as after it: 32 waiting for replies, none refused', async () => {
    const early = await Client.open(edge.url, alice.key);
    clients.push(early);
    for (let cmdId = 1; cmdId <= 32; cmdId++) early.send({ tsSubCmds: [{ cmdId, entityId: aliceVenue, keys: ['entries'] }] });
    await early.next(() => early.messages.filter((m) => m.type === 'subscribed' || m.errorCode).length >= 32);
    const answered = early.messages.filter((m) => m.type === 'subscribed').map((m) => Number(m.cmdId));
    expect(answered.sort((a, b) => a - b)).toEqual(Array.from({ length: 32 }, (_, i) => i + 1));
    expect(early.messages.filter((m) => m.errorCode)).toEqual([]);
  });

  it('answers a plain GET /ws (no upgrade) with 426 in the envelope, and unknown paths with 404', async () => {
    const http = edge.url.replace('ws://', 'http://');
    const plain = await request(http);
    expect(plain.status).toBe(426);
    expect(plain.body.code).toBe('VALIDATION_ERROR');
    const unknown = await request(http.replace('/ws', '/nope'));
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: expect.any(String), code: 'NOT_FOUND' });
  });
});

describe('subscribing and pushes', () => {
  it('pushes every accepted event of the venue, metrics restricted to the subscribed keys', async () => {
    const c = await open(alice.key);
    await c.subscribe(7, aliceVenue, ['entries']);
    const ts = new Date(Date.now() - 2000).toISOString();
    await ingestDensity(api, alice.key, aliceVenue, [
      { type: 'entry', count: 5, timestamp: ts },
      { type: 'entry', count: 6, timestamp: ts },
      { type: 'exit', count: 5, timestamp: ts },
    ]);
    await c.next((m) => m.cmdId === 7 && m.data);
    await sleep(1000);
    const pushes = c.pushes(7);
    // The exit carries exits and occupancy but no entries: not pushed.
    expect(pushes).toEqual([
      { cmdId: 7, data: { venueId: aliceVenue, eventType: 'entry', metrics: { entries: 1 }, time: ts } },
      { cmdId: 7, data: { venueId: aliceVenue, eventType: 'entry', metrics: { entries: 1 }, time: ts } },
    ]);
  });

  it('sends all subscribed keys an event carries, and nothing for an event carrying none', async () => {
    const c = await open(alice.key);
    await c.subscribe(1, aliceVenue, ['occupancy', 'temperature', 'exits']);
    await ingestDensity(api, alice.key, aliceVenue, [{ type: 'heartbeat' }, { type: 'exit', count: 3 }]);
    await ingestEnvironment(api, alice.key, aliceVenue, { temperature: 21.5, humidity: 40 });
    await c.next((m) => m.data?.eventType === 'environment');
    await sleep(500);
    expect(c.pushes().map((m) => [m.data.eventType, m.data.metrics])).toEqual([
      ['exit', { exits: 1, occupancy: 3 }],
      ['environment', { temperature: 21.5 }],
    ]);
  });

  it('keeps subscriptions apart by cmdId: two on one venue each get their own keys; another venue is not pushed', async () => {
    const c = await open(alice.key);
    await c.subscribe(1, aliceVenue, ['entries']);
    await c.subscribe(2, aliceVenue, ['occupancy']);
    await c.subscribe(3, aliceOther, ['entries', 'occupancy']);
    await ingestDensity(api, alice.key, aliceVenue, [{ type: 'entry', count: 9 }]);
    await c.next((m) => m.cmdId === 1 && m.data);
    await c.next((m) => m.cmdId === 2 && m.data);
    await sleep(500);
    expect(c.pushes(1).map((m) => m.data.metrics)).toEqual([{ entries: 1 }]);
    expect(c.pushes(2).map((m) => m.data.metrics)).toEqual([{ occupancy: 9 }]);
    expect(c.pushes(3)).toEqual([]);
  });

  it('re-subscribing with the same cmdId replaces that subscription', async () => {
    const c = await open(alice.key);
    await c.subscribe(4, aliceVenue, ['entries']);
    await c.subscribe(4, aliceOther, ['occupancy']);
    await ingestDensity(api, alice.key, aliceVenue, [{ type: 'entry', count: 1 }]);
    await ingestDensity(api, alice.key, aliceOther, [{ type: 'entry', count: 2 }]);
    await c.next((m) => m.cmdId === 4 && m.data);
    await sleep(800);
    expect(c.pushes(4).map((m) => [m.data.venueId, m.data.metrics])).toEqual([[aliceOther, { occupancy: 2 }]]);
  });

  it('delivers to every subscribed connection of the operator', async () => {
    const [a, b] = [await open(alice.key), await open(alice.key)];
    await a.subscribe(1, aliceVenue, ['entries']);
    await b.subscribe(99, aliceVenue, ['entries']);
    await ingestDensity(api, alice.key, aliceVenue, [{ type: 'entry' }]);
    expect((await a.next((m) => m.data)).cmdId).toBe(1);
    expect((await b.next((m) => m.data)).cmdId).toBe(99);
  });
});

describe('unsubscribing', () => {
  it("ThingsBoard's form {tsSubCmds:[{cmdId, entityId, unsubscribe:true}]} stops that subscription only", async () => {
    const c = await open(alice.key);
    await c.subscribe(1, aliceVenue, ['entries']);
    await c.subscribe(2, aliceVenue, ['entries']);
    const reply = await c.command({ tsSubCmds: [{ cmdId: 1, entityId: aliceVenue, unsubscribe: true }] }, 1);
    expect(reply).toEqual({ cmdId: 1, type: 'unsubscribed', entityId: aliceVenue, cmdIds: [1] });
    await ingestDensity(api, alice.key, aliceVenue, [{ type: 'entry' }]);
    await c.next((m) => m.cmdId === 2 && m.data);
    await sleep(800);
    expect(c.pushes(1)).toEqual([]);
  });

  it("the spec's form {tsUnsubCmds:[{entityId}]} stops every subscription to the venue on the connection", async () => {
    const c = await open(alice.key);
    await c.subscribe(1, aliceVenue, ['entries']);
    await c.subscribe(2, aliceVenue, ['occupancy']);
    await c.subscribe(3, aliceOther, ['entries']);
    const reply = await c.command({ tsUnsubCmds: [{ entityId: aliceVenue }] }, null);
    expect(reply).toEqual({ cmdId: null, type: 'unsubscribed', entityId: aliceVenue, cmdIds: [1, 2] });
    await ingestDensity(api, alice.key, aliceVenue, [{ type: 'entry', count: 1 }]);
    await ingestDensity(api, alice.key, aliceOther, [{ type: 'entry', count: 1 }]);
    await c.next((m) => m.cmdId === 3 && m.data);
    await sleep(800);
    expect(c.pushes().map((m) => m.cmdId)).toEqual([3]);
  });

  it('says so when there is nothing to unsubscribe, and keeps the rest', async () => {
    const c = await open(alice.key);
    await c.subscribe(1, aliceVenue, ['entries']);
    expect(await c.command({ tsSubCmds: [{ cmdId: 5, unsubscribe: true }] }, 5)).toMatchObject({ cmdId: 5, errorCode: 'NOT_FOUND' });
    expect(await c.command({ tsSubCmds: [{ cmdId: 1, entityId: aliceOther, unsubscribe: true }] }, 1)).toMatchObject({
      cmdId: 1,
      errorCode: 'NOT_FOUND',
    });
    expect(await c.command({ tsUnsubCmds: [{ cmdId: 8, entityId: aliceOther }] }, 8)).toMatchObject({ cmdId: 8, errorCode: 'NOT_FOUND' });
    await ingestDensity(api, alice.key, aliceVenue, [{ type: 'entry' }]);
    await c.next((m) => m.cmdId === 1 && m.data);
  });
});

describe('bad commands get {cmdId, errorCode, errorMsg}, change nothing and keep the connection open', () => {
  const cases: Array<[string, unknown, number | null, string]> = [
    ['malformed JSON', '{"tsSubCmds": [', null, 'VALIDATION_ERROR'],
    ['a JSON array', '[1,2]', null, 'VALIDATION_ERROR'],
    ['an empty object', {}, null, 'VALIDATION_ERROR'],
    ['an unsupported command type', { attrSubCmds: [] }, null, 'VALIDATION_ERROR'],
    ['tsSubCmds not an array', { tsSubCmds: { cmdId: 1 } }, null, 'VALIDATION_ERROR'],
    ['a missing cmdId', { tsSubCmds: [{ entityId: randomUUID(), keys: ['occupancy'] }] }, null, 'VALIDATION_ERROR'],
    ['a fractional cmdId', { tsSubCmds: [{ cmdId: 1.5, entityId: randomUUID(), keys: ['occupancy'] }] }, null, 'VALIDATION_ERROR'],
    ['entityId not a uuid', { tsSubCmds: [{ cmdId: 11, entityId: 'venue-1', keys: ['occupancy'] }] }, 11, 'VALIDATION_ERROR'],
    ['an unknown key', { tsSubCmds: [{ cmdId: 12, entityId: '$VENUE', keys: ['occupancy', 'pm25'] }] }, 12, 'VALIDATION_ERROR'],
    ['no keys', { tsSubCmds: [{ cmdId: 13, entityId: '$VENUE' }] }, 13, 'VALIDATION_ERROR'],
    ['empty keys', { tsSubCmds: [{ cmdId: 14, entityId: '$VENUE', keys: [] }] }, 14, 'VALIDATION_ERROR'],
    ['keys not strings', { tsSubCmds: [{ cmdId: 15, entityId: '$VENUE', keys: [1] }] }, 15, 'VALIDATION_ERROR'],
    ['unsubscribe: false', { tsSubCmds: [{ cmdId: 16, entityId: '$VENUE', unsubscribe: false }] }, 16, 'VALIDATION_ERROR'],
    ['an unknown venue', { tsSubCmds: [{ cmdId: 17, entityId: randomUUID(), keys: ['occupancy'] }] }, 17, 'NOT_FOUND'],
    ["another operator's venue", { tsSubCmds: [{ cmdId: 18, entityId: '$BOB', keys: ['occupancy'] }] }, 18, 'FORBIDDEN'],
    ['tsUnsubCmds without entityId', { tsUnsubCmds: [{ cmdId: 19 }] }, 19, 'VALIDATION_ERROR'],
  ];

  it.each(cases)('%s', async (_name, message, cmdId, errorCode) => {
    const c = await open(alice.key);
    await c.subscribe(1, aliceVenue, ['entries']);
    const text = (typeof message === 'string' ? message : JSON.stringify(message))
      .replaceAll('$VENUE', aliceVenue)
      .replaceAll('$BOB', bobVenue);
    const reply = await c.command(text, cmdId);
    expect(Object.keys(reply).sort()).toEqual(['cmdId', 'errorCode', 'errorMsg']);
    expect(reply).toMatchObject({ cmdId, errorCode });
    expect(reply.errorMsg.length).toBeGreaterThan(5);
    // Nothing changed: the subscription still pushes, nothing else does, the connection is open.
    await ingestDensity(api, alice.key, aliceVenue, [{ type: 'entry' }]);
    if (cmdId !== null) await ingestDensity(api, bob.key, bobVenue, [{ type: 'entry' }]);
    await c.next((m) => m.cmdId === 1 && m.data);
    await sleep(300);
    expect(c.pushes().map((m) => m.cmdId)).toEqual([1]);
    expect(c.closed).toBeNull();
  });

  it('answers each entry of a mixed message on its own: the good ones apply', async () => {
    const c = await open(alice.key);
    c.send({
      tsSubCmds: [
        { cmdId: 1, entityId: aliceVenue, keys: ['bogus'] },
        { cmdId: 2, entityId: aliceVenue, keys: ['entries'] },
      ],
    });
    expect(await c.next((m) => m.cmdId === 1)).toMatchObject({ errorCode: 'VALIDATION_ERROR' });
    expect(await c.next((m) => m.cmdId === 2)).toMatchObject({ type: 'subscribed' });
    await ingestDensity(api, alice.key, aliceVenue, [{ type: 'entry' }]);
    await c.next((m) => m.cmdId === 2 && m.data);
    expect(c.pushes(1)).toEqual([]);
  });

  it('refuses a binary frame with VALIDATION_ERROR', async () => {
    const c = await open(alice.key);
    const from = c.messages.length;
    c.ws.send(Buffer.from(JSON.stringify({ tsSubCmds: [] })), () => undefined);
    // ws sends a Buffer as a binary frame.
    expect(await c.next((m) => m.errorCode !== undefined, 5000, from)).toMatchObject({ cmdId: null, errorCode: 'VALIDATION_ERROR' });
    expect(c.closed).toBeNull();
  });

  it('answers a message above the size limit with VALIDATION_ERROR, and drops a connection sending one far above it', async () => {
    const c = await open(alice.key);
    await c.subscribe(1, aliceVenue, ['entries']);
    const limit = edge.cfg.WS_MAX_MESSAGE_BYTES;
    const big = { tsSubCmds: [{ cmdId: 2, entityId: aliceVenue, keys: ['entries'], pad: 'x'.repeat(limit) }] };
    const reply = await c.command(big, null);
    expect(reply).toEqual({ cmdId: null, errorCode: 'VALIDATION_ERROR', errorMsg: expect.stringContaining(`at most ${limit}`) });
    await ingestDensity(api, alice.key, aliceVenue, [{ type: 'entry' }]);
    await c.next((m) => m.cmdId === 1 && m.data);
    expect(c.pushes(2)).toEqual([]);

    const huge = await open(alice.key);
    huge.send('x'.repeat(limit * HARD_FRAME_FACTOR + 1));
    const closed = await huge.waitClose();
    // uWebSockets.js drops such a connection without reading the frame (no close frame: 1006).
    expect(closed.code).toBe(1006);
    expect(c.closed).toBeNull();
  });

  it('limits subscriptions per connection with SUBSCRIPTION_LIMIT', async () => {
    const small = await startTestEdge({ WS_MAX_SUBSCRIPTIONS: '2' });
    try {
      const c = await Client.connected(small.url, alice.key);
      clients.push(c);
      await c.subscribe(1, aliceVenue, ['entries']);
      await c.subscribe(2, aliceOther, ['entries']);
      expect(await c.command({ tsSubCmds: [{ cmdId: 3, entityId: aliceVenue, keys: ['occupancy'] }] }, 3)).toMatchObject({
        errorCode: 'SUBSCRIPTION_LIMIT',
      });
      // Replacing an existing cmdId is not an extra subscription.
      await c.subscribe(2, aliceVenue, ['occupancy']);
    } finally {
      await small.close();
    }
  });
});

describe('tenant isolation', () => {
  it("never delivers another operator's events, whatever is sent", async () => {
    const eve = await open(bob.key);
    const attempts = [
      { tsSubCmds: [{ cmdId: 1, entityId: aliceVenue, keys: ['entries', 'occupancy'] }] },
      { tsSubCmds: [{ cmdId: 1, entityId: aliceVenue, keys: ['entries'], operatorId: alice.id }] },
      { tsSubCmds: [{ cmdId: 2, entityId: aliceVenue.toUpperCase(), keys: ['entries'] }] },
      {
        tsSubCmds: [
          { cmdId: 3, entityId: bobVenue, keys: ['entries'] },
          { cmdId: 4, entityId: aliceVenue, keys: ['entries'] },
        ],
      },
      { tsSubCmds: [{ cmdId: 5, entityId: aliceVenue, keys: ['entries'] }], operatorId: alice.id },
      { tsUnsubCmds: [{ entityId: aliceVenue }], tsSubCmds: [{ cmdId: 6, entityId: aliceVenue, keys: ['entries'] }] },
    ];
    for (const a of attempts) eve.send(a);
    await eve.next((m) => m.cmdId === 3 && m.type === 'subscribed');
    await sleep(500);
    // Alice watches too, so the events are known to have gone through the edge.
    const alicesClient = await open(alice.key);
    await alicesClient.subscribe(1, aliceVenue, ['entries', 'occupancy']);
    await ingestDensity(api, alice.key, aliceVenue, [
      { type: 'entry', count: 1 },
      { type: 'occupancy', count: 4 },
    ]);
    await ingestDensity(api, bob.key, bobVenue, [{ type: 'entry', count: 2 }]);
    await alicesClient.next((m) => m.data?.eventType === 'occupancy');
    await eve.next((m) => m.cmdId === 3 && m.data);
    await sleep(500);
    expect(eve.pushes().map((m) => m.data.venueId)).toEqual([bobVenue]);
    expect(JSON.stringify(eve.messages)).not.toContain(alice.id);
    expect(JSON.stringify(eve.messages).toLowerCase()).not.toContain(aliceVenue);
    const ack = eve.messages.filter((m) => m.type === 'subscribed').map((m) => m.entityId);
    expect(ack).toEqual([bobVenue]);
    expect(alicesClient.pushes().every((m) => m.data.venueId === aliceVenue)).toBe(true);
  });

  it("does not push to the owner's connection another operator's event on the same venue id (defence in depth)", async () => {
    // An event naming alice's venue but bob's operator can only come from a broken producer;
    // the edge still checks the operator on every push.
    const c = await open(alice.key);
    await c.subscribe(1, aliceVenue, ['entries']);
    const { Kafka, logLevel } = await import('kafkajs');
    const { encodeEventMessages } = await import('../../lib/events/wire.js');
    const kafka = new Kafka({ brokers: edge.cfg.KAFKA_BROKERS, clientId: 'edge-test', logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    const base = {
      zoneId: null,
      connectorType: 'density' as const,
      type: 'entry' as const,
      ts: Date.now() - 1000,
      receivedAt: Date.now(),
      device: null,
      randomizedMac: false,
      payload: {},
    };
    await producer.send({
      topic: `${edge.cfg.KAFKA_TOPIC_PREFIX}.events.v1`,
      messages: [
        {
          key: aliceVenue,
          ...encodeEventMessages([{ ...base, id: randomUUID(), operatorId: bob.id, venueId: aliceVenue, metrics: { entries: 100 } }])[0]!,
        },
        { key: aliceVenue, value: Buffer.from('not json') },
        {
          key: aliceVenue,
          ...encodeEventMessages([{ ...base, id: randomUUID(), operatorId: alice.id, venueId: aliceVenue, metrics: { entries: 1 } }])[0]!,
        },
      ],
    });
    await producer.disconnect();
    await c.next((m) => m.data);
    await sleep(500);
    expect(c.pushes().map((m) => m.data.metrics)).toEqual([{ entries: 1 }]);
  });
});
