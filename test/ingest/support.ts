import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { Kafka, logLevel, type Consumer } from 'kafkajs';
import type { Config } from '../../lib/config.js';
import { topicsFor } from '../../lib/topology.js';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { decodeEventMessage } from '../../lib/events/wire.js';
import type { RunningApi } from '../support/env.js';
import { request, type JsonResponse } from '../support/http.js';

export interface Published {
  event: CanonicalEvent;
  /** The bytes of the message holding it, exactly as on the topic. */
  raw: Buffer;
  key: string;
  partition: number;
}

/** Reads the run's events topic from the beginning with its own consumer group, keeping every event. */
export class EventTap {
  private readonly seen: Published[] = [];

  private constructor(private readonly consumer: Consumer) {}

  static async start(cfg: Config): Promise<EventTap> {
    const kafka = new Kafka({ brokers: cfg.KAFKA_BROKERS, clientId: 'ingest-test-tap', logLevel: logLevel.NOTHING });
    const consumer = kafka.consumer({ groupId: `ingest-test-${randomUUID()}`, maxWaitTimeInMs: 100 });
    const tap = new EventTap(consumer);
    await consumer.connect();
    await consumer.subscribe({ topic: topicsFor(cfg).events, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message, partition }) => {
        // Other suites of the run may have put deliberately malformed messages on the topic.
        let decoded;
        try {
          decoded = decodeEventMessage(message.value);
        } catch {
          return;
        }
        for (const { event } of decoded)
          if (event) tap.seen.push({ event: event.toJSON(), raw: message.value!, key: message.key?.toString() ?? '', partition });
      },
    });
    return tap;
  }

  forVenue(venueId: string): Published[] {
    return this.seen.filter((p) => p.event.venueId === venueId);
  }

  /** Waits until `n` events for the venue arrived, then a little longer to catch any extra one. */
  async waitFor(venueId: string, n: number, timeoutMs = 20_000): Promise<Published[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.forVenue(venueId).length < n && Date.now() < deadline) await sleep(50);
    await sleep(300);
    const got = this.forVenue(venueId);
    expect(got.length, `events for venue ${venueId}`).toBe(n);
    return got;
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An ISO timestamp `agoMs` in the past. */
export const isoAgo = (agoMs = 60_000) => new Date(Date.now() - agoMs).toISOString();

export const ingest = (api: RunningApi, key: string, json: unknown): Promise<JsonResponse> => request(`${api.url}/ingest`, { key, json });

export async function addZone(api: RunningApi, key: string, venueId: string, slug: string): Promise<string> {
  const res = await request(`${api.url}/api/venues/${venueId}/zones`, { key, json: { slug, name: slug, type: 'area' } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id;
}
