import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { KafkaMessage } from 'kafkajs';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { encodeEventMessages } from '../../lib/events/wire.js';
import { chRows, chsql } from '../../clickhouse/client.js';
import { rows as pgRows, sql } from '../../postgres/client.js';
import { DLQ_HEADERS } from '../../pipeline/sink/dead-letter.js';
import type { RunningSink } from '../../pipeline/sink/events-sink.js';
import {
  allCommitted,
  deviceId,
  event,
  expectedTotals,
  newTenant,
  offsets,
  openHarness,
  produce,
  produceRequests,
  quietCh,
  rawCount,
  rollupTotals,
  startSink,
  waitFor,
  type Harness,
} from './harness.js';
import { tcpProxy } from '../support/tcp-proxy.js';

// Each test gets its own topics, so raw counts, offsets and dead letters are its own.
let h: Harness;
beforeEach(async () => {
  h = await openHarness();
});
afterEach(async () => {
  await h.close();
});

const group = () => `sink-test-${randomUUID()}`;
const HOUR_MS = 3_600_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The test's dead-letter topic from the beginning, once it holds at least `n` messages. */
async function deadLetters(n: number): Promise<KafkaMessage[]> {
  const dlq: KafkaMessage[] = [];
  const reader = h.kafka.consumer({ groupId: group(), maxWaitTimeInMs: 100 });
  await reader.connect();
  await reader.subscribe({ topic: h.topics.deadLetter, fromBeginning: true });
  await reader.run({ eachMessage: async ({ message }) => void dlq.push(message) });
  await waitFor(`${n} dead letters`, async () => dlq.length >= n);
  await reader.disconnect();
  return dlq;
}

/** A mix of readings, entries, exits and device sightings over the last two hours. */
function workload(t: { operatorId: string; venueIds: string[] }, n: number, end = Date.now()): CanonicalEvent[] {
  return Array.from({ length: n }, (_, i) => {
    const base = { operatorId: t.operatorId, venueId: t.venueIds[i % t.venueIds.length]!, ts: end - 7_200_000 + i * 1_733 };
    switch (i % 4) {
      case 0:
        return event({ ...base, type: 'environment', metrics: { temperature: 18 + (i % 50) / 10, co2: 400 + (i % 300) } });
      case 1:
        return event({ ...base, type: 'entry', metrics: { entries: 1 + (i % 3) } });
      case 2:
        return event({ ...base, type: 'exit', metrics: { exits: 1 + (i % 2) } });
      default:
        return event({ ...base, type: 'device_seen', device: deviceId(`dev-${i % 37}`) });
    }
  });
}

/** Raw count and every rollup equal what the events imply, exactly (sums to float precision). */
async function expectExact(events: CanonicalEvent[], venueIds: string[], topicRows = events.length) {
  expect(await rawCount(h)).toBe(topicRows);
  const all = expectedTotals(events);
  for (const table of ['telemetry_1m', 'telemetry_1h', 'telemetry_1d'] as const) {
    // The daily rollup keeps no device sets (migration 0009): `devices` by day merges hour and minute sets.
    const want = Object.fromEntries(Object.entries(all).filter(([key]) => table !== 'telemetry_1d' || key !== 'devices'));
    const got = await rollupTotals(h, table, venueIds);
    expect(Object.keys(got).sort(), table).toEqual(Object.keys(want).sort());
    for (const [key, w] of Object.entries(want)) {
      const g = got[key]!;
      if (key === 'devices') {
        expect(g.devices, `${table} devices`).toBe(w.devices);
        continue;
      }
      expect(g.count, `${table} ${key} count`).toBe(w.count);
      expect(g.sum, `${table} ${key} sum`).toBeCloseTo(w.sum, 6);
      expect(g.min, `${table} ${key} min`).toBe(w.min);
      expect(g.max, `${table} ${key} max`).toBe(w.max);
    }
  }
  // Every point stays in the raw table (there is no points table since migration 0008).
  const [points] = await chRows<{ n: number }>(
    h.ch,
    chsql`SELECT toUInt32(sum(length(metric_values))) AS n FROM events WHERE has(${venueIds}, toString(venue_id))`,
  );
  expect(points!.n).toBe(events.reduce((n, e) => n + Object.keys(e.metrics).length, 0));
}

describe('events sink', () => {
  it('writes every event once in large batches, with exact rollups, local days and last_event_at', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC', 'Europe/Berlin']);
    const events = workload(t, 2000);
    // 23:30 UTC yesterday is already today in Berlin (UTC+1 or +2): its daily bucket is the local day.
    const today = Math.floor(Date.now() / 86_400_000) * 86_400_000;
    const lateEvening = event({ operatorId: t.operatorId, venueId: t.venueIds[1]!, ts: today - 30 * 60_000, metrics: { noise: 55 } });
    events.push(lateEvening);
    await produce(h, events);
    const g = group();
    const s = await startSink(h, g, { batchRows: 400 });
    try {
      await allCommitted(h, g);
      await expectExact(events, t.venueIds);
      expect(s.sink.stats.largestInsert).toBeLessThanOrEqual(400);
      expect(s.sink.stats.rows).toBe(events.length);
      // Batches span partitions and fetches: far fewer inserts than Kafka batches.
      expect(s.sink.stats.inserts).toBeLessThanOrEqual(15);
      const [row] = await chRows<{ local_day: string; utc_day: string }>(
        h.ch,
        chsql`SELECT toString(local_day) AS local_day, toString(toDate(ts)) AS utc_day FROM events WHERE event_id = toUUID(${lateEvening.id})`,
      );
      const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
      expect(row).toEqual({ local_day: isoDay(today), utc_day: isoDay(today - 86_400_000) });
      const last = await pgRows<{ id: string; last_event_at: Date }>(
        h.db,
        sql`SELECT id, last_event_at FROM venues WHERE id = ANY(${t.venueIds}::uuid[])`,
      );
      for (const v of last) {
        const newest = Math.max(...events.filter((e) => e.venueId === v.id).map((e) => e.ts));
        expect(v.last_event_at.getTime(), v.id).toBe(newest);
      }
    } finally {
      await s.stop();
    }
  });

  it.each([
    ['one event per message', 1],
    ['a request of 70 events per message, split across inserts', 70],
  ])('replays a consumer killed between insert and commit without counting anything twice: %s', async (_, perMessage) => {
    const t = await newTenant(h.db, 'starter', ['UTC']);
    const events = workload(t, 1500);
    // Sorted by venue so a message holds up to 70 events of one venue, as one ingest request does.
    if (perMessage > 1)
      await produceRequests(
        h,
        [...events].sort((a, b) => a.venueId.localeCompare(b.venueId)),
        perMessage,
      );
    else await produce(h, events);
    const g = group();
    let crashed = false;
    const first: RunningSink = await startSink(h, g, {
      batchRows: 300,
      afterInsert: async () => {
        // The process "dies" right after ClickHouse took the rows: the consumer stops, nothing is
        // committed. A batch queued behind it is inserted and "dies" too (a dead process commits nothing).
        if (!crashed) void first.consumer.consumer.stop();
        crashed = true;
        throw new Error('simulated crash between insert and commit');
      },
    });
    await waitFor('the crash', async () => crashed);
    await first.consumer.stop();
    const before = await rawCount(h);
    const { committed } = await offsets(h, g);
    expect(before).toBeGreaterThan(0);
    expect(committed.every((c) => c === -1)).toBe(true);

    const second = await startSink(h, g, { batchRows: 300 });
    try {
      await allCommitted(h, g);
      await expectExact(events, t.venueIds);
      expect(second.sink.stats.skipped).toBe(before);
    } finally {
      await second.stop();
    }
  });

  it('dead-letters poison messages with the reason and origin in headers, and writes the rest', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    const other = await newTenant(h.db, 'pro', ['UTC']);
    const good = workload(t, 20);
    const poison = [
      { key: 'x', raw: 'not json {' },
      { key: 'x', raw: JSON.stringify({ id: 'nope', ts: 'yesterday' }) },
      { key: 'x', raw: JSON.stringify(event({ operatorId: t.operatorId, venueId: randomUUID(), ts: Date.now() })) },
      { key: 'x', raw: JSON.stringify(event({ operatorId: t.operatorId, venueId: other.venueIds[0]!, ts: Date.now() })) },
    ];
    await produce(h, [...good.slice(0, 10), ...poison, ...good.slice(10)]);
    const g = group();
    const s = await startSink(h, g);
    try {
      await allCommitted(h, g);
      await expectExact(good, t.venueIds);
      expect(s.sink.stats.deadLettered).toBe(4);
    } finally {
      await s.stop();
    }

    const dlq = await deadLetters(4);

    expect(dlq.map((m) => m.value!.toString()).sort()).toEqual(poison.map((p) => p.raw).sort());
    const header = (m: KafkaMessage, name: string) => m.headers![name]!.toString();
    const reasons = dlq.map((m) => header(m, DLQ_HEADERS.error));
    expect(reasons.filter((r) => r.startsWith('undecodable event'))).toHaveLength(2);
    expect(reasons).toContain(`unknown venue ${JSON.parse(poison[2]!.raw).venueId}`);
    expect(reasons).toContain(`venue ${other.venueIds[0]} belongs to another operator`);
    const { end } = await offsets(h, g);
    const positions = new Set<string>();
    for (const m of dlq) {
      expect(header(m, DLQ_HEADERS.topic)).toBe(h.topics.events);
      const partition = Number(header(m, DLQ_HEADERS.partition));
      const offset = Number(header(m, DLQ_HEADERS.offset));
      expect(offset).toBeLessThan(end[partition]!);
      positions.add(`${partition}:${offset}`);
    }
    expect(positions.size).toBe(4);
  });

  it('dead-letters an event of a request message alone, with its index, and stores the others of that message', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    const other = await newTenant(h.db, 'pro', ['UTC']);
    const venueId = t.venueIds[0]!;
    const good = workload({ operatorId: t.operatorId, venueIds: [venueId] }, 6);
    const foreign = event({ operatorId: other.operatorId, venueId, ts: Date.now() });
    const elements: unknown[] = [good[0], good[1], { id: 'nope', ts: 'yesterday' }, good[2], foreign, ...good.slice(3)];
    await h.producer.send({ topic: h.topics.events, acks: -1, messages: [{ key: venueId, value: JSON.stringify(elements) }] });
    const g = group();
    const s = await startSink(h, g);
    try {
      await allCommitted(h, g);
      await expectExact(good, [venueId]);
      expect(s.sink.stats.deadLettered).toBe(2);
    } finally {
      await s.stop();
    }
    const dlq = await deadLetters(2);
    const byIndex = new Map(dlq.map((m) => [m.headers![DLQ_HEADERS.index]!.toString(), m]));
    expect([...byIndex.keys()].sort()).toEqual(['2', '4']);
    // Each letter is the element alone, so replaying it cannot repeat the stored ones.
    expect(JSON.parse(byIndex.get('2')!.value!.toString())).toEqual(elements[2]);
    expect(byIndex.get('2')!.headers![DLQ_HEADERS.error]!.toString()).toMatch(/^undecodable event: /);
    expect(JSON.parse(byIndex.get('4')!.value!.toString())).toEqual(foreign);
    expect(byIndex.get('4')!.headers![DLQ_HEADERS.error]!.toString()).toBe(`venue ${venueId} belongs to another operator`);
  });

  it('reads a request’s envelope, and dead-letters a bad event of it as a whole event that replays alone', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    const venueId = t.venueIds[0]!;
    const receivedAt = Date.now();
    const good = workload({ operatorId: t.operatorId, venueIds: [venueId] }, 6).map((e) => ({ ...e, receivedAt }));
    const [message] = encodeEventMessages(good);
    // The envelope's line with the events as columns, then a payload's line per event (lib/events/wire.ts).
    const [envelopeLine, ...payloads] = message!.value.toString().split('\n');
    const sent = JSON.parse(envelopeLine!) as { columns: Record<string, unknown[]> };
    expect(sent.columns.id).toHaveLength(6);
    const columns = Object.keys(sent.columns);
    const bad: Record<string, unknown> = Object.fromEntries(columns.map((k) => [k, sent.columns[k]![0]]));
    Object.assign(bad, { id: randomUUID(), device: 'AA:BB:CC:DD:EE:FF' });
    for (const k of columns) sent.columns[k]!.splice(2, 0, bad[k]);
    payloads.splice(2, 0, payloads[0]!);
    const value = [JSON.stringify(sent), ...payloads].join('\n');
    await h.producer.send({ topic: h.topics.events, acks: -1, messages: [{ key: venueId, value }] });
    const g = group();
    const s = await startSink(h, g);
    try {
      await allCommitted(h, g);
      await expectExact(good, [venueId]);
      expect(s.sink.stats.deadLettered).toBe(1);
    } finally {
      await s.stop();
    }
    const [letter] = await deadLetters(1);
    expect(letter!.headers![DLQ_HEADERS.index]!.toString()).toBe('2');
    expect(JSON.parse(letter!.value!.toString())).toEqual({
      ...bad,
      payload: good[0]!.payload,
      operatorId: t.operatorId,
      venueId,
      connectorType: good[0]!.connectorType,
      receivedAt: good[0]!.receivedAt,
    });
  });

  it('dead-letters events ClickHouse could not store as sent, and stores any payload string exactly', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    const at = { operatorId: t.operatorId, venueId: t.venueIds[0]!, ts: Date.now() - HOUR_MS };
    const odd = ['nul\u0000byte', 'lone \ud800 surrogate', 'emoji 😀 and ünïcödé', 'x'.repeat(100_000)];
    const good = odd.map((message) => event({ ...at, type: 'heartbeat', payload: { message } }));
    const poison = [
      // DateTime ends in 2106: 18.16 would silently store these at a wrapped-around time.
      event({ ...at, ts: Date.UTC(2200, 0, 1) }),
      event({ ...at, receivedAt: Date.UTC(2200, 0, 1) }),
      // A device must be a pseudonym: never a raw MAC, never text ClickHouse cannot read back.
      event({ ...at, type: 'device_seen', device: 'aa:bb:cc:dd:ee:ff' }),
      event({ ...at, type: 'device_seen', device: 'lone \ud800 surrogate' }),
    ].map((e) => ({ key: e.venueId, raw: JSON.stringify(e) }));
    // Parses, but too deep to store.
    const deep = JSON.stringify(event({ ...at, payload: { nested: 'here' } })).replace(
      '"here"',
      `${'{"a":'.repeat(50_000)}1${'}'.repeat(50_000)}`,
    );
    poison.push({ key: at.venueId, raw: deep });
    await produce(h, [...good, ...poison]);
    const g = group();
    const s = await startSink(h, g);
    try {
      await allCommitted(h, g);
      await expectExact(good, t.venueIds);
      expect(s.sink.stats.deadLettered).toBe(poison.length);
      const stored = await chRows<{ payload: string }>(h.ch, chsql`SELECT payload FROM events WHERE kafka_topic = ${h.topics.events}`);
      expect(stored.map((r) => JSON.parse(r.payload).message).sort()).toEqual([...odd].sort());
    } finally {
      await s.stop();
    }
  });

  it('drops re-deliveries of an event whose id derives from a vendor event id, in one batch or later', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    // Ingest derives ids of vendor events (Square) as version-8 UUIDs; random ids are version 4.
    const vendorId = () => randomUUID().replace(/^(.{14})./, '$18');
    const payment = event({
      id: vendorId(),
      operatorId: t.operatorId,
      venueId: t.venueIds[0]!,
      ts: Date.now() - HOUR_MS,
      type: 'transaction',
      metrics: { amount: 1250 },
    });
    const other = event({ ...payment, id: vendorId(), metrics: { amount: 99 } });
    const g = group();
    const s = await startSink(h, g);
    try {
      await produce(h, [payment, { ...payment, receivedAt: payment.receivedAt + 1000 }, other]);
      await allCommitted(h, g);
      await produce(h, [{ ...payment, receivedAt: payment.receivedAt + 60_000 }]);
      await allCommitted(h, g);
      await expectExact([payment, other], t.venueIds, 2);
      expect(s.sink.stats.duplicates).toBe(2);
    } finally {
      await s.stop();
    }
  });

  it('looks up thousands of derived ids of one batch in statements ClickHouse accepts, storing each event once', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    // Idempotent ingest derives every id of a batch: a batch of 8,000 once made a lookup over max_query_size.
    const derived = () => randomUUID().replace(/^(.{14})./, '$18');
    const events = workload(t, 8000).map((e) => ({ ...e, id: derived() }));
    const g = group();
    const s = await startSink(h, g, { batchRows: 10_000, batchMs: 2000 });
    try {
      await produce(h, [...events, ...events.slice(0, 100)]);
      await allCommitted(h, g, 60_000);
      await expectExact(events, t.venueIds, 8000);
      expect(s.sink.stats.duplicates).toBe(100);
    } finally {
      await s.stop();
    }
  });

  it('pauses without committing while ClickHouse is unreachable and resumes by itself', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    const events = workload(t, 600);
    const proxy = await tcpProxy(h.cfg.CLICKHOUSE_URL);
    const ch = quietCh(h.cfg, proxy.url);
    proxy.down();
    const g = group();
    const s = await startSink(h, g, { ch });
    try {
      await produce(h, events);
      await sleep(3000);
      expect((await offsets(h, g)).committed.every((c) => c === -1)).toBe(true);
      expect(await rawCount(h)).toBe(0);
      expect(s.sink.stats.inserts).toBe(0);
      // Still a member: the partitions were not handed away while it waited.
      const [desc] = (await h.admin.describeGroups([g])).groups;
      expect(desc!.state).toBe('Stable');
      expect(desc!.members).toHaveLength(1);

      proxy.up();
      await allCommitted(h, g);
      await expectExact(events, t.venueIds);
    } finally {
      await s.stop();
      await ch.close();
      await proxy.close();
    }
  });

  it('keeps counts exact when a second member joins and partitions move', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC', 'Asia/Kolkata', 'America/New_York']);
    const events = workload(t, 3000);
    const g = group();
    const a = await startSink(h, g, { batchRows: 250 });
    let b: RunningSink | undefined;
    try {
      await produce(h, events.slice(0, 1000));
      b = await startSink(h, g, { batchRows: 250 });
      await produce(h, events.slice(1000, 2000));
      await a.stop();
      await produce(h, events.slice(2000));
      await allCommitted(h, g);
      await expectExact(events, t.venueIds);
    } finally {
      await b?.stop();
    }
  });

  it('while it writes a batch no call awaits, the group waits for that write before partitions move', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC', 'Asia/Kolkata', 'America/New_York']);
    const events = workload(t, 1200);
    const proxy = await tcpProxy(h.cfg.CLICKHOUSE_URL);
    const ch = quietCh(h.cfg, proxy.url);
    const g = group();
    const a = await startSink(h, g, { ch, batchRows: 100_000, batchMs: 300 });
    let b: Promise<RunningSink> | undefined;
    try {
      const fetched = new Promise<void>((resolve) =>
        a.consumer.consumer.on(a.consumer.consumer.events.START_BATCH_PROCESS, () => resolve()),
      );
      proxy.hold();
      await produce(h, events);
      await fetched;
      // The batch's deadline passed: its write is under way, its requests held on the way to ClickHouse.
      await sleep(1000);
      expect(a.sink.stats.commits).toBe(0);
      // A second member: the group rebalances, and joining resolves only once the first member joined again.
      b = startSink(h, g);
      await sleep(3000);
      const [desc] = (await h.admin.describeGroups([g])).groups;
      expect(desc!.state).not.toBe('Stable');
      // Nobody took the partitions of the write under way.
      expect(await rawCount(h)).toBe(0);
      proxy.release();
      await b;
      await allCommitted(h, g);
      await expectExact(events, t.venueIds);
      expect(a.sink.stats.commits).toBeGreaterThan(0);
    } finally {
      proxy.release();
      await (await b)?.stop();
      await a.stop();
      await ch.close();
      await proxy.close();
    }
  });

  it('fetches while it holds a batch: messages that arrive meanwhile are written with it', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    const events = workload(t, 400);
    const g = group();
    const s = await startSink(h, g, { batchRows: 100_000, batchMs: 3000 });
    try {
      await produce(h, events.slice(0, 200));
      await sleep(1500);
      await produce(h, events.slice(200));
      await allCommitted(h, g);
      // One write: the second half joined the batch the first half started, before its deadline.
      expect(s.sink.stats.commits).toBe(1);
      await expectExact(events, t.venueIds);
    } finally {
      await s.stop();
    }
  });

  it('at shutdown stops fetching, writes and commits what it holds, then leaves', async () => {
    const t = await newTenant(h.db, 'pro', ['UTC']);
    const events = workload(t, 200);
    const g = group();
    const s = await startSink(h, g, { batchRows: 100_000, batchMs: 60_000 });
    const started = new Promise<void>((resolve) => s.consumer.consumer.on(s.consumer.consumer.events.START_BATCH_PROCESS, () => resolve()));
    await produce(h, events);
    await started;
    await sleep(500);
    // Held, not written: the batch is neither full nor a minute old.
    expect(await rawCount(h)).toBe(0);
    await s.stop();
    await allCommitted(h, g, 1000);
    await expectExact(events, t.venueIds);
  });
});
