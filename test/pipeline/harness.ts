import { createHash, randomUUID } from 'node:crypto';
import type { Admin, Kafka, Producer } from 'kafkajs';
import { ClickHouseLogLevel, createClient } from '@clickhouse/client';
import { testConfig } from '../support/env.js';
import { createLogger } from '../../lib/logger.js';
import { createKafka, createProducer, topicOffsets } from '../../lib/kafka.js';
import { ensureTopology, eventsTopology, type Topics } from '../../lib/topology.js';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { encodeEventMessages } from '../../lib/events/wire.js';
import type { Config } from '../../lib/config.js';
import type { Logger } from '../../lib/logger.js';
import { chRows, chsql, createCh, raw, type Ch } from '../../clickhouse/client.js';
import { createDb, one, sql, type Db } from '../../postgres/client.js';
import { expect } from 'vitest';
import { insertEvents, type EventRow } from '../../clickhouse/queries/events.js';
import { eventsTarget, type RunningSink, type SinkOptions } from '../../pipeline/sink/events-sink.js';
import { runSink } from '../../pipeline/sink/run.js';
import type { SinkTarget } from '../../pipeline/sink/sink.js';
import type { Plan } from '../../domain/tenants/plans.js';

/** A real stack for sink tests: its own events and dead-letter topics, so offsets and counts are its own. */
export interface Harness {
  cfg: Config;
  log: Logger;
  kafka: Kafka;
  admin: Admin;
  producer: Producer;
  ch: Ch;
  db: Db;
  topics: Topics;
  close(): Promise<void>;
}

export async function openHarness(): Promise<Harness> {
  const cfg = testConfig();
  const log = createLogger('sink-test', cfg.LOG_LEVEL);
  const kafka = createKafka(cfg, log, `sink-test-${randomUUID().slice(0, 8)}`);
  const id = randomUUID().slice(0, 8);
  const topics: Topics = {
    events: `${cfg.KAFKA_TOPIC_PREFIX}.sinktest-${id}.events`,
    deadLetter: `${cfg.KAFKA_TOPIC_PREFIX}.sinktest-${id}.dlq`,
  };
  await ensureTopology(kafka, eventsTopology(topics, cfg.KAFKA_PARTITIONS));
  const admin = kafka.admin();
  await admin.connect();
  const producer = createProducer(kafka);
  await producer.connect();
  const ch = createCh(cfg);
  const db = createDb(cfg, 4);
  return {
    cfg,
    log,
    kafka,
    admin,
    producer,
    ch,
    db,
    topics,
    async close() {
      await producer.disconnect();
      await admin.disconnect();
      await ch.close();
      await db.end();
    },
  };
}

/** An operator on `plan` with one venue per time zone, straight in Postgres. */
export async function newTenant(db: Db, plan: Plan, timezones: string[]): Promise<{ operatorId: string; venueIds: string[] }> {
  const op = await one<{ id: string }>(
    db,
    sql`INSERT INTO operators (name, email, plan) VALUES ('sink test', 'sink@example.com', ${plan}) RETURNING id`,
  );
  const venueIds: string[] = [];
  for (const tz of timezones) {
    const v = await one<{ id: string }>(
      db,
      sql`INSERT INTO venues (operator_id, name, timezone) VALUES (${op!.id}, ${`venue ${tz}`}, ${tz}) RETURNING id`,
    );
    venueIds.push(v!.id);
  }
  return { operatorId: op!.id, venueIds };
}

export { event } from '../unit/support/events.js';

/** A device pseudonym (32 hex digits, as ingest derives them) standing for `name`. */
export const deviceId = (name: string): string => createHash('md5').update(name).digest('hex');

/** Publishes in order, keyed by venue (as ingest does); raw values for poison messages. */
export async function produce(h: Harness, items: Array<CanonicalEvent | { key: string; raw: string }>): Promise<void> {
  for (let i = 0; i < items.length; i += 500) {
    await h.producer.send({
      topic: h.topics.events,
      acks: -1,
      messages: items
        .slice(i, i + 500)
        .map((it) => ('raw' in it ? { key: it.key, value: it.raw } : { key: it.venueId, ...encodeEventMessages([it])[0]! })),
    });
  }
}

/** Produces the events as ingest does: a request's messages, here up to `perMessage` consecutive events of one venue sharing their receivedAt. */
export async function produceRequests(h: Harness, events: CanonicalEvent[], perMessage: number): Promise<void> {
  const messages: Array<{ key: string; value: Buffer; headers: Record<string, string> }> = [];
  for (let i = 0; i < events.length;) {
    const venueId = events[i]!.venueId;
    const request: CanonicalEvent[] = [];
    while (i < events.length && events[i]!.venueId === venueId && request.length < perMessage) request.push(events[i++]!);
    // As at ingest, a request's events share their receivedAt (and so one message envelope).
    for (const e of request) e.receivedAt = request[0]!.receivedAt;
    for (const m of encodeEventMessages(request)) messages.push({ key: venueId, ...m });
  }
  for (let i = 0; i < messages.length; i += 100)
    await h.producer.send({ topic: h.topics.events, acks: -1, messages: messages.slice(i, i + 100) });
}

/** The events sink on the harness's topics (or another target of events, e.g. `cutOnceTarget`). */
export function startSink(
  h: Harness,
  groupId: string,
  opts: Partial<SinkOptions> = {},
  target: SinkTarget<EventRow> = eventsTarget(h.db),
): Promise<RunningSink> {
  return runSink(h.kafka, target, {
    groupId,
    partitions: h.cfg.KAFKA_PARTITIONS,
    ch: h.ch,
    db: h.db,
    producer: h.producer,
    topics: h.topics,
    log: h.log,
    batchRows: 1000,
    batchMs: 200,
    drainMs: 5000,
    retry: { initialMs: 100, maxMs: 400 },
    ...opts,
  });
}

/** Committed offset per partition (-1 when none), and the topic's end per partition. */
export async function offsets(h: Harness, groupId: string): Promise<{ committed: number[]; end: number[] }> {
  const [group] = await h.admin.fetchOffsets({ groupId, topics: [h.topics.events] });
  const ends = (await topicOffsets(h.admin, h.topics.events)).sort((a, b) => a.partition - b.partition);
  const committed = ends.map((e) => Number(group!.partitions.find((p) => p.partition === e.partition)?.offset ?? -1));
  return { committed, end: ends.map((e) => Number(e.high)) };
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Resolves once the group committed everything published so far. */
export function allCommitted(h: Harness, groupId: string, timeoutMs?: number): Promise<true> {
  return waitFor(
    `group ${groupId} to commit to the end`,
    async () => {
      const o = await offsets(h, groupId);
      return o.end.every((e, i) => o.committed[i] === e || (e === 0 && o.committed[i] === -1));
    },
    timeoutMs,
  );
}

export async function rawCount(h: Harness): Promise<number> {
  const [row] = await chRows<{ n: number }>(h.ch, chsql`SELECT toUInt32(count()) AS n FROM events WHERE kafka_topic = ${h.topics.events}`);
  return row!.n;
}

export interface KeyTotals {
  sum: number;
  count: number;
  min: number;
  max: number;
}

/** Per key totals of a rollup table (or `devices`: distinct devices over the whole table) for some venues. */
export async function rollupTotals(
  h: Pick<Harness, 'ch'>,
  table: 'telemetry_1m' | 'telemetry_1h' | 'telemetry_1d',
  venueIds: string[],
): Promise<Record<string, KeyTotals & { devices: number }>> {
  const rows = await chRows<{ key: string; sum: number; count: number; min: number; max: number; devices: number }>(
    h.ch,
    chsql`SELECT key, sumMerge(v_sum) AS sum, toUInt32(countMerge(v_count)) AS count, minMerge(v_min) AS min, maxMerge(v_max) AS max,
                 toUInt32(uniqExactMerge(devices)) AS devices
            FROM ${raw(table)} WHERE has(${venueIds}, toString(venue_id)) GROUP BY key`,
  );
  return Object.fromEntries(rows.map(({ key, ...rest }) => [key, rest]));
}

/** What the rollups must hold for these events, computed here. */
export function expectedTotals(events: CanonicalEvent[]): Record<string, KeyTotals & { devices: number }> {
  const out: Record<string, KeyTotals & { devices: number }> = {};
  const add = (key: string, v: number) => {
    const t = (out[key] ??= { sum: 0, count: 0, min: Infinity, max: -Infinity, devices: 0 });
    t.sum += v;
    t.count++;
    t.min = Math.min(t.min, v);
    t.max = Math.max(t.max, v);
  };
  const devices = new Set<string>();
  for (const e of events) {
    add('events', 1);
    for (const [k, v] of Object.entries(e.metrics)) add(k, v);
    if (e.device) devices.add(e.device);
  }
  if (devices.size > 0) out.devices = { sum: 0, count: 0, min: 0, max: 0, devices: devices.size };
  return out;
}

/** A client through `url` (a proxy) that does not print its own connection errors: the sink logs them. */
export function quietCh(cfg: Config, url: string): Ch {
  return createClient({
    url,
    username: cfg.CLICKHOUSE_USER,
    password: cfg.CLICKHOUSE_PASSWORD,
    database: cfg.CLICKHOUSE_DATABASE,
    log: { level: ClickHouseLogLevel.OFF },
  });
}

/** The raw events' views, in every node's database. */
export const EVENT_VIEWS = ['telemetry_1m_mv', 'telemetry_1h_mv', 'telemetry_1d_mv', 'retention_classes_events_mv', 'derive_marks_mv'];

/**
 * The events target whose first insert stores its raw rows with the views detached on `nodes` (the
 * run's one server, or every node of a cluster), then fails as a connection reset would: what a
 * server killed between an insert's raw part and its views' parts leaves
 * (docs/pipeline.md#materialized-views-and-partial-failure).
 */
export function cutOnceTarget(db: Db, nodes: (ch: Ch) => Ch[] = (ch) => [ch]): SinkTarget<EventRow> & { inserts(): number } {
  let inserts = 0;
  return {
    ...eventsTarget(db),
    /** Inserts tried, the cut one included. */
    inserts: () => inserts,
    async insert(ch, rows) {
      if (inserts++ > 0) return insertEvents(ch, rows);
      for (const node of nodes(ch)) for (const v of EVENT_VIEWS) await node.command({ query: `DETACH TABLE ${v}` });
      try {
        await insertEvents(ch, rows);
      } finally {
        for (const node of nodes(ch)) for (const v of EVENT_VIEWS) await node.command({ query: `ATTACH TABLE ${v}` });
      }
      throw new Error('connection reset between the raw part and the views');
    },
  };
}

/** Every rollup of the venues holds what the events imply: counts exact, sums to float precision, devices but by day. */
export async function expectRollupsOf(h: Pick<Harness, 'ch'>, events: CanonicalEvent[], venueIds: string[]): Promise<void> {
  const want = expectedTotals(events);
  for (const table of ['telemetry_1m', 'telemetry_1h', 'telemetry_1d'] as const) {
    const got = await rollupTotals(h, table, venueIds);
    for (const [key, w] of Object.entries(want)) {
      if (key === 'devices') {
        if (table !== 'telemetry_1d') expect(got[key]!.devices, `${table} devices`).toBe(w.devices);
        continue;
      }
      expect(got[key]!.count, `${table} ${key} count`).toBe(w.count);
      expect(got[key]!.sum, `${table} ${key} sum`).toBeCloseTo(w.sum, 6);
      expect(got[key]!.min, `${table} ${key} min`).toBe(w.min);
      expect(got[key]!.max, `${table} ${key} max`).toBe(w.max);
    }
  }
}
