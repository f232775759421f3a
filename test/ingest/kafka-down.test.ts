import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { billingPeriodStart } from '../../domain/limits/quotas.js';
import { createKafka, createPublisher, topicOffsets } from '../../lib/kafka.js';
import { createLogger } from '../../lib/logger.js';
import { EventTap, ingest, isoAgo } from './support.js';
import { createMissingTopics } from '../../lib/topology.js';

// Two API instances on the same databases: one with the real broker, one whose Kafka is a closed
// port (the shared broker is never stopped: other suites use it).
let api: RunningApi;
let down: RunningApi;
let tap: EventTap;
beforeAll(async () => {
  api = await startApi();
  tap = await EventTap.start(api.services.cfg);
  down = await startApi(testConfig({ KAFKA_BROKERS: '127.0.0.1:1' }));
});
afterAll(async () => {
  await down?.close();
  await tap.stop();
  await api.close();
});

const seen = () => ({ type: 'device_seen', timestamp: isoAgo(), payload: { clientMac: '00:11:22:33:44:55' } });

async function usage(op: TestOperator) {
  const { rows: anchor } = await api.services.db.query(`SELECT billing_anchor FROM operators WHERE id = $1`, [op.id]);
  const { rows } = await api.services.db.query(
    `SELECT ingest_events, ingest_dropped FROM usage_counters WHERE operator_id = $1 AND period_start = $2`,
    [op.id, billingPeriodStart(anchor[0].billing_anchor)],
  );
  return rows[0] ?? { ingest_events: 0, ingest_dropped: 0 };
}

describe('POST /ingest when Kafka cannot take the events', () => {
  it('starts anyway and shows Kafka disconnected on /health', async () => {
    const { status, body } = await request(`${down.url}/health`);
    expect(status).toBe(200);
    expect(body.kafka.connected).toBe(false);
    expect(body.status).toBe('degraded');
  });

  it('answers 503 with Retry-After within seconds, reports nothing accepted, releases the quota; the resent batch is then accepted', async () => {
    const op = await newOperator(api, 'pro');
    const venue = await newVenue(api, op.key);
    const body = {
      venue_id: venue.id,
      connector_type: 'meraki',
      events: [seen(), seen(), { type: 'foo', timestamp: isoAgo(), payload: {} }],
    };
    await ingest(api, op.key, { ...body, events: [seen()] });
    expect(await usage(op)).toEqual({ ingest_events: 1, ingest_dropped: 0 });

    const started = Date.now();
    const res = await ingest(down, op.key, body);
    expect(Date.now() - started).toBeLessThan(8000);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(res.body).toEqual({ error: expect.stringContaining('nothing was accepted'), code: 'SERVICE_UNAVAILABLE' });
    expect(await usage(op)).toEqual({ ingest_events: 1, ingest_dropped: 0 });

    const resent = await ingest(api, op.key, body);
    expect(resent.body).toMatchObject({ accepted: 2, rejected: 1 });
    expect(await usage(op)).toEqual({ ingest_events: 3, ingest_dropped: 0 });
    await tap.waitFor(venue.id, 3);
  });

  it('gives back a Free operator’s granted and dropped counts alike', async () => {
    const op = await newOperator(api, 'free');
    const venue = await newVenue(api, op.key);
    const { rows } = await api.services.db.query(`SELECT billing_anchor FROM operators WHERE id = $1`, [op.id]);
    await api.services.db.query(
      `INSERT INTO usage_counters (operator_id, period_start, ingest_events) VALUES ($1, $2, 9999)
       ON CONFLICT (operator_id, period_start) DO UPDATE SET ingest_events = 9999`,
      [op.id, billingPeriodStart(rows[0].billing_anchor)],
    );
    const res = await ingest(down, op.key, { venue_id: venue.id, connector_type: 'meraki', events: [seen(), seen(), seen()] });
    expect(res.status).toBe(503);
    expect(await usage(op)).toEqual({ ingest_events: 9999, ingest_dropped: 0 });
    expect(tap.forVenue(venue.id)).toEqual([]);
  });
});

describe('the publisher', () => {
  it('fails a send it cannot complete within its deadline, then publishes with a fresh producer', async () => {
    const cfg = testConfig();
    const log = createLogger('publisher-test', 'silent');
    const kafka = createKafka(cfg, log);
    const topic = `${cfg.KAFKA_TOPIC_PREFIX}.publisher-test.${randomUUID()}`;
    const admin = kafka.admin();
    await admin.connect();
    await createMissingTopics(admin, [{ topic, numPartitions: 1 }]);
    const publisher = createPublisher(kafka, log, { deadlineMs: 3000 });
    try {
      await publisher.connect();
      const started = Date.now();
      await expect(publisher.publish([{ topic: `${topic}.missing`, messages: [{ value: 'lost' }] }])).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(4000);
      await publisher.publish([{ topic, messages: [{ key: 'k', value: 'kept' }] }]);
      const offsets = await topicOffsets(admin, topic);
      expect(offsets.map((o) => o.high)).toEqual(['1']);
    } finally {
      await publisher.disconnect();
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect();
    }
  });
});
