import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { Kafka, logLevel, type Consumer } from 'kafkajs';
import { chRows, chsql } from '../../clickhouse/client.js';
import { derivedTopicNames } from '../../lib/topology.js';
import { decodeIngestReport, type IngestReport } from '../../lib/events/derived.js';
import { createLogger } from '../../lib/logger.js';
import { runEventsSink, type RunningEventsSink } from '../../pipeline/sink/events-sink.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request, type JsonResponse } from '../support/http.js';

/**
 * A real api with the events sink behind it, on a topic prefix of its own (so the sink reads only
 * this file's events), and a tap on the ingest reports topic (connector health's input).
 */
export interface HookStack {
  api: RunningApi;
  reports: ReportTap;
  close(): Promise<void>;
}

export async function startHookStack(): Promise<HookStack> {
  const prefix = `${testConfig().KAFKA_TOPIC_PREFIX}.hooks${randomUUID().slice(0, 6)}`;
  const cfg = testConfig({ KAFKA_TOPIC_PREFIX: prefix });
  const log = createLogger('hooks-test', cfg.LOG_LEVEL);
  const api = await startApi(cfg);
  const { kafka, db, ch, producer, topics } = api.services;
  const sink: RunningEventsSink = await runEventsSink(kafka, {
    groupId: `${prefix}.sink.events`,
    partitions: cfg.KAFKA_PARTITIONS,
    ch,
    db,
    producer,
    topics,
    log,
    batchRows: 5000,
    batchMs: 100,
    drainMs: 5000,
  });
  const reports = await ReportTap.start(cfg.KAFKA_BROKERS, derivedTopicNames(prefix).ingestReports);
  return {
    api,
    reports,
    async close() {
      await reports.stop();
      await sink.stop();
      await api.close();
    },
  };
}

/** Reads the ingest reports topic from the beginning, keeping every report. */
export class ReportTap {
  readonly seen: IngestReport[] = [];
  private constructor(private readonly consumer: Consumer) {}

  static async start(brokers: string[], topic: string): Promise<ReportTap> {
    const kafka = new Kafka({ brokers, clientId: 'hooks-test-reports', logLevel: logLevel.NOTHING });
    const consumer = kafka.consumer({ groupId: `hooks-test-${randomUUID()}`, maxWaitTimeInMs: 100 });
    const tap = new ReportTap(consumer);
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        tap.seen.push(decodeIngestReport(message.value));
      },
    });
    return tap;
  }

  async waitFor(match: (r: IngestReport) => boolean, timeoutMs = 15_000): Promise<IngestReport> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.seen.find(match);
      if (found) return found;
      if (Date.now() > deadline) throw new Error('timed out waiting for an ingest report');
      await sleep(50);
    }
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function newIntegration(
  api: RunningApi,
  key: string,
  venueId: string,
  connector_type: string,
  config: Record<string, unknown>,
): Promise<string> {
  const res = await request(`${api.url}/api/venues/${venueId}/integrations`, { key, json: { connector_type, config } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id;
}

/** Posts a vendor body as its exact text (what the signature covers). */
export function deliver(
  api: RunningApi,
  integrationId: string,
  rawBody: string,
  headers: Record<string, string> = {},
): Promise<JsonResponse> {
  return request(`${api.url}/hooks/${integrationId}`, {
    method: 'POST',
    rawBody,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

export interface StoredEvent {
  event_id: string;
  event_type: string;
  connector_type: string;
  operator_id: string;
  ts_ms: number;
  device: string;
  payload: string;
  metric_names: string[];
  metric_values: number[];
}

export async function storedEvents(api: RunningApi, venueId: string): Promise<StoredEvent[]> {
  return chRows<StoredEvent>(
    api.services.ch,
    chsql`SELECT toString(event_id) AS event_id, event_type, connector_type, toString(operator_id) AS operator_id,
                 toFloat64(toUnixTimestamp(ts)) * 1000 + ts_ms AS ts_ms, device, payload, metric_names, metric_values
            FROM events WHERE venue_id = ${venueId} ORDER BY ts, event_id`,
  );
}

/** Waits until the venue holds `n` events, then a little longer to catch any extra one; returns them (exactly n). */
export async function waitForStored(api: RunningApi, venueId: string, n: number, timeoutMs = 15_000): Promise<StoredEvent[]> {
  const deadline = Date.now() + timeoutMs;
  while ((await storedEvents(api, venueId)).length < n && Date.now() < deadline) await sleep(100);
  await sleep(600);
  const got = await storedEvents(api, venueId);
  expect(got.length, `events stored for venue ${venueId}`).toBe(n);
  return got;
}

/** Nothing arrives for the venue within `ms` (the sink writes within ~0.3 s here). */
export async function expectNothingStored(api: RunningApi, venueId: string, ms = 1500): Promise<void> {
  await sleep(ms);
  expect(await storedEvents(api, venueId)).toEqual([]);
}

/** No client MAC in any stored column: only pseudonyms (32 hex digits) stand for devices. AP MACs (infrastructure) are allowed. */
export function expectNoRawMac(events: StoredEvent[], clientMacs: string[]): void {
  const normalised = clientMacs.map((m) => m.toLowerCase().replace(/[^0-9a-f]/g, ''));
  for (const e of events) {
    const text = JSON.stringify(e).toLowerCase();
    for (const mac of normalised) {
      expect(text.replace(/[^0-9a-f]/g, ''), 'a raw client MAC is stored').not.toContain(mac);
    }
    if (e.device) expect(e.device).toMatch(/^[0-9a-f]{32}$/);
  }
}
