import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { Kafka, logLevel, type Consumer, type Producer } from 'kafkajs';
import type { Config } from '../../lib/config.js';
import { createKafka, createProducer, createPublisher, type Publisher, topicOffsets } from '../../lib/kafka.js';
import { createLogger } from '../../lib/logger.js';
import { alarmTopicName, derivedTopicNames } from '../../lib/topology.js';
import { decodeAlarmEvent, type AlarmEvent } from '../../lib/events/alarms.js';
import {
  encodeConnectorHealthChange,
  encodeOccupancyUpdate,
  type ConnectorHealth,
  type ConnectorHealthChange,
  type OccupancyUpdate,
} from '../../lib/events/derived.js';
import { runAlarmRules, type AlarmRulesOptions, type RunningAlarmRules } from '../../pipeline/alarms/alarm-rules.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `check` returns a value other than undefined (or fails after `ms`). */
export async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** A run of the real stack with its own topic prefix: the api, a rule consumer, producers of rule inputs and a tap on alarm events. */
export interface AlarmStack {
  cfg: Config;
  api: RunningApi;
  kafka: Kafka;
  publisher: Publisher;
  producers: Producer[];
  tap: AlarmTap;
  rules?: RunningAlarmRules;
  startRules(opts?: Partial<AlarmRulesOptions>): Promise<RunningAlarmRules>;
  close(): Promise<void>;
}

export async function openAlarmStack(producerCount = 4, opts: { rules?: boolean } = {}): Promise<AlarmStack> {
  const prefix = `${testConfig().KAFKA_TOPIC_PREFIX}.al${randomUUID().slice(0, 6)}`;
  const cfg = testConfig({ KAFKA_TOPIC_PREFIX: prefix });
  const api = await startApi(cfg);
  const log = createLogger('alarm-test', cfg.LOG_LEVEL);
  const kafka = createKafka(cfg, log, `alarm-test-${randomUUID().slice(0, 6)}`);
  const publisher = createPublisher(kafka, log);
  const stack: AlarmStack = {
    cfg,
    api,
    kafka,
    publisher,
    producers: [],
    tap: undefined as unknown as AlarmTap,
    async startRules(opts = {}) {
      stack.rules = await runAlarmRules({
        kafka,
        db: api.services.db,
        log,
        publisher,
        prefix,
        tickMs: 300,
        commitIntervalMs: 0,
        relayAfterMs: 1_000,
        ...opts,
      });
      return stack.rules;
    },
    async close() {
      await stack.rules?.stop();
      await stack.tap.stop();
      for (const p of stack.producers) await p.disconnect();
      await publisher.disconnect();
      await api.close();
    },
  };
  // The api's start-up created the stack's topics (ensureTopology).
  if (opts.rules ?? true) await stack.startRules();
  stack.tap = await AlarmTap.start(cfg);
  for (let i = 0; i < producerCount; i++) {
    const p = createProducer(kafka);
    await p.connect();
    stack.producers.push(p);
  }
  return stack;
}

/** Every alarm event on the stack's alarms topic, read from the beginning. */
export class AlarmTap {
  readonly events: AlarmEvent[] = [];
  private constructor(private readonly consumer: Consumer) {}

  static async start(cfg: Config): Promise<AlarmTap> {
    const kafka = new Kafka({ brokers: cfg.KAFKA_BROKERS, clientId: 'alarm-test-tap', logLevel: logLevel.NOTHING });
    const consumer = kafka.consumer({ groupId: `alarm-tap-${randomUUID()}`, maxWaitTimeInMs: 100 });
    const tap = new AlarmTap(consumer);
    await consumer.connect();
    await consumer.subscribe({ topic: alarmTopicName(cfg.KAFKA_TOPIC_PREFIX), fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void tap.events.push(decodeAlarmEvent(message.value)) });
    return tap;
  }

  of(alarmId: string): AlarmEvent[] {
    return this.events.filter((e) => e.alarm.id === alarmId);
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }
}

export interface Site {
  op: TestOperator;
  venueId: string;
  zone(capacity: number | null, name?: string): Promise<string>;
  integration(): Promise<string>;
}

export async function newSite(api: RunningApi, op?: TestOperator): Promise<Site> {
  const operator = op ?? (await newOperator(api, 'pro'));
  const venue = await newVenue(api, operator.key, { name: 'Alarm venue' });
  return {
    op: operator,
    venueId: venue.id,
    async zone(capacity, name = 'Hall') {
      const res = await request(`${api.url}/api/venues/${venue.id}/zones`, {
        key: operator.key,
        json: { slug: `z-${randomUUID().slice(0, 8)}`, name, type: 'area', ...(capacity === null ? {} : { capacity }) },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.id as string;
    },
    async integration() {
      const res = await request(`${api.url}/api/venues/${venue.id}/integrations`, {
        key: operator.key,
        json: { connector_type: 'meraki', config: { api_key: 'k-123', org_id: '42' } },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.id as string;
    },
  };
}

let clock = Date.now();
/** Strictly increasing event times, so every update is newer than the last. */
export const nextTs = () => (clock = Math.max(clock + 1, Date.now()));

export function occupancy(site: Site, zoneId: string, value: number, capacity: number | null = null): OccupancyUpdate {
  return {
    operatorId: site.op.id,
    venueId: site.venueId,
    zoneId,
    value,
    capacity,
    percent: capacity ? (value / capacity) * 100 : null,
    ts: nextTs(),
    reason: 'flow',
    clamped: 0,
  };
}

export function health(
  site: Site,
  integrationId: string,
  status: ConnectorHealth,
  previous: ConnectorHealth | null,
  lastEventAt: number | null,
): ConnectorHealthChange {
  return {
    operatorId: site.op.id,
    venueId: site.venueId,
    integrationId,
    connectorType: 'meraki',
    status,
    previous,
    lastEventAt,
    rejectionRate: 0,
    reason:
      status === 'offline'
        ? 'no event or heartbeat for 5 minutes'
        : status === 'degraded'
          ? 'over 20% of events rejected'
          : 'events arriving',
    ts: nextTs(),
  };
}

/** Sends updates in order, with one producer (the order a processor emits a zone's updates in). */
export async function sendOccupancy(stack: AlarmStack, updates: OccupancyUpdate[], producer = stack.producers[0]!): Promise<void> {
  const topic = derivedTopicNames(stack.cfg.KAFKA_TOPIC_PREFIX).occupancy;
  await producer.send({ topic, acks: -1, messages: updates.map((u) => ({ key: u.venueId, value: encodeOccupancyUpdate(u) })) });
}

export async function sendHealth(stack: AlarmStack, changes: ConnectorHealthChange[]): Promise<void> {
  const topic = derivedTopicNames(stack.cfg.KAFKA_TOPIC_PREFIX).connectorHealth;
  await stack.producers[0]!.send({
    topic,
    acks: -1,
    messages: changes.map((c) => ({ key: c.venueId, value: encodeConnectorHealthChange(c) })),
  });
}

/** The venue's alarms through the API, newest first. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function alarmsOf(stack: AlarmStack, site: Site, query = ''): Promise<any[]> {
  const res = await request(`${stack.api.url}/api/alarms?venue_id=${site.venueId}&limit=200${query}`, { key: site.op.key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.alarms;
}

/** Waits until the rule consumer has applied every input sent so far (its committed offsets reach the end). */
export async function drained(stack: AlarmStack, groupId = stack.rules!.groupId): Promise<void> {
  const admin = stack.kafka.admin();
  await admin.connect();
  try {
    const topics = derivedTopicNames(stack.cfg.KAFKA_TOPIC_PREFIX);
    await until('the rule consumer to catch up', async () => {
      for (const topic of [topics.occupancy, topics.connectorHealth]) {
        const ends = await topicOffsets(admin, topic);
        const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
        for (const end of ends) {
          const at = committed!.partitions.find((p) => p.partition === end.partition);
          if (Number(end.offset) > 0 && Number(at?.offset ?? -1) < Number(end.offset)) return undefined;
        }
      }
      return true;
    });
  } finally {
    await admin.disconnect();
  }
}
