import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONNECTORS } from '../../domain/ingest/connectors/index.js';
import { CONNECTOR_TYPES, EVENT_TYPES } from '../../lib/events/vocabulary.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import {
  checkProperty,
  encodeLoosely,
  isEnvelope,
  junkHeaderValue,
  junkNumber,
  junkString,
  junkValue,
  leaksOf,
  newVictim,
  rawRequest,
  type Victim,
} from './support.js';

const RUNS_PER_CONNECTOR = Number(process.env.FUZZ_RUNS ?? 200);

let api: RunningApi;
let me: TestOperator;
let victim: Victim;
let myVenueId: string;

beforeAll(async () => {
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  me = await newOperator(api, 'enterprise');
  victim = await newVictim(api);
  myVenueId = (await newVenue(api, me.key, { name: 'Ingest fuzz' })).id;
});
afterAll(async () => {
  await api.close();
});

const MAC_LIKE = /^([0-9a-f]{2}[:-]?){5}[0-9a-f]{2}$/i;

/** A MAC in one of the spellings connectors send. */
const macArb = fc
  .tuple(fc.uint8Array({ minLength: 6, maxLength: 6 }), fc.constantFrom(':', '-', ''), fc.boolean())
  .map(([bytes, sep, upper]) => {
    const hex = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join(sep);
    return upper ? hex.toUpperCase() : hex;
  });

/** Every spelling of a MAC, to look for in an answer. */
const spellings = (mac: string): string[] => {
  const hex = mac.replace(/[:-]/g, '').toLowerCase();
  const pairs = hex.match(/../g)!;
  return [hex, pairs.join(':'), pairs.join('-')];
};

const timestampArb = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 3_600 }).map((s) => new Date(Date.now() - s * 1000).toISOString()) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '2024-13-45T99:99:99Z',
      '1970-01-01T00:00:00Z',
      '9999-12-31T23:59:59Z',
      '',
      'yesterday',
      '2026-11-23T01:00:00+14:00',
      '+275760-09-13T00:00:00Z',
    ),
  },
  { weight: 1, arbitrary: junkNumber },
  { weight: 1, arbitrary: junkValue },
);

/** One event: the connector's example with its MACs replaced by random ones, then maybe broken in one place. */
const eventArb = (connector: (typeof CONNECTOR_TYPES)[number]) => {
  const specs = Object.entries(CONNECTORS[connector]);
  return fc
    .record({
      spec: fc.constantFrom(...specs),
      type: fc.option(fc.oneof(fc.constantFrom(...EVENT_TYPES), junkString), { freq: 5 }),
      timestamp: timestampArb,
      macs: fc.array(macArb, { minLength: 4, maxLength: 4 }),
      change: fc.option(
        fc.tuple(
          fc.oneof(
            fc.constantFrom('zone', 'zone_id', 'count', 'occupancy', 'event_id', 'integration_id', 'amount', 'temperature'),
            junkString,
          ),
          junkValue,
        ),
        { freq: 2 },
      ),
      payload: fc.option(junkValue, { freq: 8 }),
      eventId: fc.option(fc.oneof(junkString, fc.uuid(), fc.constantFrom(victim?.venueId ?? 'x')), { freq: 4 }),
    })
    .map(({ spec: [type, spec], type: otherType, timestamp, macs, change, payload, eventId }) => {
      let m = 0;
      const example = Object.fromEntries(
        Object.entries(spec!.example).map(([k, v]) => [k, typeof v === 'string' && MAC_LIKE.test(v) ? macs[m++ % macs.length] : v]),
      );
      const body: Record<string, unknown> = {
        type: otherType ?? type,
        timestamp,
        payload: payload === null ? (change ? { ...example, [change[0]]: change[1] } : example) : payload,
      };
      if (eventId !== null) body.event_id = eventId;
      return { body, macs: macs.slice(0, m) };
    });
};

describe('fuzzing POST /ingest per connector', () => {
  for (const connector of CONNECTOR_TYPES) {
    it(`${connector}: every batch is a 202 counting each event, or the envelope; never accepted for another operator's venue; no MAC echoed`, async () => {
      let accepted = 0;
      const input = fc.record({
        venue: fc.constantFrom('mine', 'mine', 'mine', 'victim', 'junk'),
        junkVenue: fc.oneof(junkString, fc.uuid(), junkNumber),
        connectorType: fc.option(fc.oneof(fc.constantFrom(...CONNECTOR_TYPES), junkString), { freq: 6 }),
        events: fc.array(eventArb(connector), { minLength: 0, maxLength: 25 }),
        idempotencyKey: fc.option(fc.oneof(fc.uuid(), junkHeaderValue), { freq: 3 }),
        extra: fc.option(fc.tuple(fc.constantFrom('__proto__', 'operator_id', 'venue', 'events', 'constructor'), junkValue), { freq: 4 }),
      });
      await checkProperty(
        fc.asyncProperty(input, async ({ venue, junkVenue, connectorType, events, idempotencyKey, extra }) => {
          const venueId = venue === 'mine' ? myVenueId : venue === 'victim' ? victim.venueId : junkVenue;
          const body: Record<string, unknown> = {
            venue_id: venueId,
            connector_type: connectorType ?? connector,
            events: events.map((e) => e.body),
          };
          if (extra) body[extra[0]] = extra[1];
          const raw = Buffer.from(JSON.stringify(body));
          const headers: Array<[string, string]> = [
            ['Authorization', `Bearer ${me.key}`],
            ['Content-Type', 'application/json'],
          ];
          if (idempotencyKey !== null) headers.push(['Idempotency-Key', idempotencyKey]);
          const res = await rawRequest(api.url, { method: 'POST', path: '/ingest', headers, body: raw });
          const what = `${connector} → ${res.status} ${res.text.slice(0, 400)}`;
          expect(res.status, what).toBeLessThan(500);
          if (res.status === 202) {
            expect(venueId, what).toBe(myVenueId);
            const answer = JSON.parse(res.text) as { accepted: number; rejected: number; errors: Array<{ index: number; reason: string }> };
            expect(answer.accepted + answer.rejected, what).toBe(events.length);
            expect(answer.errors.length, what).toBe(answer.rejected);
            for (const e of answer.errors) {
              expect(e.index >= 0 && e.index < events.length, what).toBe(true);
              expect(typeof e.reason, what).toBe('string');
            }
            accepted += answer.accepted;
          } else {
            expect(isEnvelope(res.text), `no envelope: ${what}`).toBe(true);
          }
          const lower = res.text.toLowerCase();
          for (const mac of events.flatMap((e) => e.macs))
            for (const form of spellings(mac)) expect(lower.includes(form), `MAC echoed: ${what}`).toBe(false);
          expect(leaksOf(victim, raw.toString('utf8'), res.text), what).toEqual([]);
        }),
        RUNS_PER_CONNECTOR,
      );
      // The generator keeps many batches valid: the fuzzing reached the per-event checks and the publish.
      expect(accepted).toBeGreaterThan(0);
    });
  }

  it('answers junk in the URL and odd encodings of /ingest with the envelope', async () => {
    await checkProperty(
      fc.asyncProperty(
        fc.record({
          query: fc.array(fc.tuple(junkString, junkString), { maxLength: 3 }),
          encoding: fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'x-unknown'),
          charset: fc.constantFrom('utf-8', 'utf-16le', 'latin1', 'nope'),
        }),
        async ({ query, encoding, charset }) => {
          const path = `/ingest${query.length ? `?${query.map(([k, v]) => `${encodeLoosely(k)}=${encodeLoosely(v)}`).join('&')}` : ''}`;
          const body = Buffer.from(
            JSON.stringify({
              venue_id: myVenueId,
              connector_type: 'density',
              events: [{ type: 'heartbeat', timestamp: new Date().toISOString(), payload: {} }],
            }),
          );
          const res = await rawRequest(api.url, {
            method: 'POST',
            path,
            headers: [
              ['Authorization', `Bearer ${me.key}`],
              ['Content-Type', `application/json; charset=${charset}`],
              ['Content-Encoding', encoding],
            ],
            body,
          });
          expect(res.status, res.text).toBeLessThan(500);
          if (res.status >= 400) expect(isEnvelope(res.text), res.text).toBe(true);
        },
      ),
      40,
    );
  });
});
