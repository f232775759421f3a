import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { EventTap, isoAgo } from './support.js';

// One api on the real broker, one whose Kafka is a closed port (a 503 that published nothing).
let api: RunningApi;
let down: RunningApi;
let tap: EventTap;
let op: TestOperator;
beforeAll(async () => {
  [api, down] = await Promise.all([startApi(), startApi(testConfig({ KAFKA_BROKERS: '127.0.0.1:1' }))]);
  tap = await EventTap.start(api.services.cfg);
  op = await newOperator(api, 'pro');
});
afterAll(async () => {
  await tap.stop();
  await Promise.all([down.close(), api.close()]);
});

const seen = (mac: string) => ({ type: 'device_seen', timestamp: isoAgo(), payload: { clientMac: mac } });
const send = (target: RunningApi, key: string | undefined, json: unknown) =>
  request(`${target.url}/ingest`, { key: op.key, json, headers: key ? { 'idempotency-key': key } : {} });
/** Derived ids (version 8): a re-delivery keeps its id, so the sink stores it once. */
const DERIVED = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('POST /ingest with an Idempotency-Key', () => {
  it('answers a retry with the same body with the first answer and publishes nothing twice', async () => {
    const venue = await newVenue(api, op.key);
    const body = {
      venue_id: venue.id,
      connector_type: 'meraki',
      events: [seen('00:11:22:33:44:01'), seen('00:11:22:33:44:02'), { type: 'nope', timestamp: isoAgo(), payload: {} }],
    };
    const key = randomUUID();
    const first = await send(api, key, body);
    expect(first.status).toBe(202);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await Promise.all([send(api, key, body), send(api, key, body)]);
    for (const res of again) {
      expect(res.status).toBe(202);
      expect(res.body).toEqual(first.body);
      expect(res.headers.get('idempotent-replayed')).toBe('true');
    }
    const published = await tap.waitFor(venue.id, 2);
    for (const p of published) expect(p.event.id).toMatch(DERIVED);
    const usage = await request(`${api.url}/api/usage`, { key: op.key });
    // The quota counted the batch once.
    expect(usage.body.ingestEvents.used).toBe(2);
  });

  it('refuses the same key with another body with 409 CONFLICT, and a malformed key with 400', async () => {
    const venue = await newVenue(api, op.key);
    const key = randomUUID();
    expect((await send(api, key, { venue_id: venue.id, connector_type: 'meraki', events: [seen('00:11:22:33:44:03')] })).status).toBe(202);
    const other = await send(api, key, { venue_id: venue.id, connector_type: 'meraki', events: [seen('00:11:22:33:44:04')] });
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({ code: 'CONFLICT', error: expect.stringContaining('different body') });
    const bad = await send(api, 'spaces are not allowed', {
      venue_id: venue.id,
      connector_type: 'meraki',
      events: [seen('00:11:22:33:44:05')],
    });
    expect(bad.status).toBe(400);
    expect(bad.body.details).toEqual([{ field: 'idempotency-key', message: expect.any(String) }]);
    await tap.waitFor(venue.id, 1);
  });

  it('takes the body byte for byte: the same batch written out differently is another body (409)', async () => {
    const venue = await newVenue(api, op.key);
    const batch = { venue_id: venue.id, connector_type: 'meraki', events: [seen('00:11:22:33:44:0b')] };
    const key = randomUUID();
    const raw = (text: string) =>
      request(`${api.url}/ingest`, {
        key: op.key,
        rawBody: text,
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
      });
    const first = await raw(JSON.stringify(batch));
    expect(first.status).toBe(202);
    const same = await raw(JSON.stringify(batch));
    expect(same.status).toBe(202);
    expect(same.headers.get('idempotent-replayed')).toBe('true');
    const spaced = await raw(JSON.stringify(batch, null, 2));
    expect(spaced.status).toBe(409);
    expect(spaced.body).toMatchObject({ code: 'CONFLICT', error: expect.stringContaining('different body') });
    await tap.waitFor(venue.id, 1);
  });

  it('processes a retry after a 503 afresh: the key is given back when nothing was accepted', async () => {
    const venue = await newVenue(api, op.key);
    const body = { venue_id: venue.id, connector_type: 'meraki', events: [seen('00:11:22:33:44:06')] };
    const key = randomUUID();
    const refused = await send(down, key, body);
    expect(refused.status).toBe(503);
    const retried = await send(api, key, body);
    expect(retried.status).toBe(202);
    expect(retried.body).toEqual({ accepted: 1, rejected: 0, errors: [] });
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    await tap.waitFor(venue.id, 1);
  });

  it('gives the events of a retried batch the same ids when a timed-out publish did land, so they are stored once', async () => {
    const venue = await newVenue(api, op.key);
    const body = { venue_id: venue.id, connector_type: 'meraki', events: [seen('00:11:22:33:44:07'), seen('00:11:22:33:44:08')] };
    const key = randomUUID();
    expect((await send(api, key, body)).status).toBe(202);
    // The client never saw that answer (a timeout), and the key was given back as after a failure.
    await api.services.db.query(`DELETE FROM ingest_idempotency WHERE operator_id = $1 AND key = $2`, [op.id, key]);
    expect((await send(api, key, body)).status).toBe(202);
    const published = await tap.waitFor(venue.id, 4);
    const ids = published.map((p) => p.event.id);
    expect(new Set(ids).size).toBe(2);
    expect(ids.slice(2)).toEqual(ids.slice(0, 2));
  });

  it('keeps an event’s own event_id across requests, and refuses a duplicate inside one batch', async () => {
    const venue = await newVenue(api, op.key);
    const withId = (id: string, mac: string) => ({ ...seen(mac), event_id: id });
    const a = await send(api, undefined, { venue_id: venue.id, connector_type: 'meraki', events: [withId('evt-1', '00:11:22:33:44:09')] });
    const b = await send(api, undefined, {
      venue_id: venue.id,
      connector_type: 'meraki',
      events: [withId('evt-1', '00:11:22:33:44:09'), withId('evt-1', '00:11:22:33:44:09'), withId('has space', '00:11:22:33:44:0a')],
    });
    expect(a.body).toEqual({ accepted: 1, rejected: 0, errors: [] });
    expect(b.body).toEqual({
      accepted: 1,
      rejected: 2,
      errors: [
        { index: 1, reason: 'duplicate of event 0 (same event id)' },
        { index: 2, reason: 'event_id must be 1 to 128 printable ASCII characters' },
      ],
    });
    const published = await tap.waitFor(venue.id, 2);
    expect(published[0]!.event.id).toBe(published[1]!.event.id);
  });
});
