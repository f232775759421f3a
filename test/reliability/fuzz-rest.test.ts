import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATIONS } from '../../apps/api/operations/index.js';
import type { AnyOperation } from '../../apps/api/operations/operation.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { request } from '../support/http.js';
import {
  CONTENT_ENCODINGS,
  CONTENT_TYPES,
  checkProperty,
  RAW_URL_PIECES,
  encodeLoosely,
  isEnvelope,
  junkHeaderValue,
  junkNumber,
  junkString,
  junkValue,
  leaksOf,
  newVictim,
  rawJunkBody,
  rawRequest,
  type Victim,
} from './support.js';

/** Requests per operation: about 40 operations × this stays well under 30 s on the shared machine. */
const RUNS_PER_OPERATION = Number(process.env.FUZZ_RUNS ?? 80);

let api: RunningApi;
let me: TestOperator;
let victim: Victim;
let myVenueId: string;
let myZoneId: string;
const adminKey = () => api.services.cfg.ADMIN_SECRET;

/** The fuzzer's own venue and zone, made again when a generated DELETE removed them (so later operations still reach their handlers). */
async function ensureMine(): Promise<void> {
  if ((await request(`${api.url}/api/venues/${myVenueId}/zones/${myZoneId}`, { key: me.key })).status === 200) return;
  myVenueId = (await newVenue(api, me.key, { name: 'Fuzzer venue' })).id;
  const zone = await request(`${api.url}/api/venues/${myVenueId}/zones`, {
    key: me.key,
    json: { slug: 'mine', name: 'Mine', type: 'area' },
  });
  myZoneId = zone.body.id;
}

beforeAll(async () => {
  // Limits off and an Enterprise operator, so the junk reaches the handlers every time.
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  me = await newOperator(api, 'enterprise');
  victim = await newVictim(api);
  myVenueId = myZoneId = randomUUID();
  await ensureMine();
});
afterAll(async () => {
  await api.close();
});

/** Identifiers mixed into every input: the victim's (never to be answered with its data), the caller's own, junk. */
const ids = () => [victim.venueId, victim.zoneId, victim.integrationId, victim.alarmId, victim.op.id, myVenueId, myZoneId, me.id];
const idArb = fc.oneof(
  { weight: 3, arbitrary: fc.nat().map((i) => ids()[i % ids().length]!) },
  { weight: 3, arbitrary: fc.constantFrom('mine', 'zone').map((w) => (w === 'mine' ? myVenueId : myZoneId)) },
  { weight: 1, arbitrary: fc.nat().map((i) => ids()[i % ids().length]!.toUpperCase()) },
  { weight: 1, arbitrary: fc.uuid() },
);

const segmentArb = fc.oneof(
  { weight: 3, arbitrary: idArb },
  { weight: 2, arbitrary: junkString.map((s) => encodeLoosely(s.slice(0, 2_000))) },
  { weight: 1, arbitrary: fc.constantFrom(...RAW_URL_PIECES) },
  { weight: 1, arbitrary: junkNumber.map(String) },
);

const shapeKeys = (schema: z.ZodType | undefined): string[] => {
  const shape = (schema as { shape?: Record<string, unknown> } | undefined)?.shape;
  return shape ? Object.keys(shape) : [];
};

const ODD_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'a[b]',
  'a.b',
  '',
  'venue_id',
  'operator_id',
  'id',
  'events',
  'config',
  'connector_type',
];

const queryArb = (op: AnyOperation) =>
  fc
    .array(
      fc.tuple(
        fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom(...shapeKeys(op.query), 'limit') },
          { weight: 1, arbitrary: fc.constantFrom(...ODD_KEYS) },
        ),
        fc.oneof(
          idArb,
          junkString.map((s) => encodeLoosely(s.slice(0, 3_000))),
          fc.constantFrom(...RAW_URL_PIECES),
          junkNumber.map(String),
        ),
      ),
      { maxLength: 6 },
    )
    .map((pairs) => (pairs.length === 0 ? '' : `?${pairs.map(([k, v]) => `${encodeLoosely(k)}=${v}`).join('&')}`));

/** A valid body per writing operation: the fuzzer sends it as is or with one field replaced by junk, so handlers get past validation too. */
const validBody = (op: AnyOperation, n: number): Record<string, unknown> | undefined =>
  (<Record<string, Record<string, unknown>>>{
    'post /api/operators': { name: `fuzz ${n}`, email: `fuzz-${n}@example.com` },
    'put /api/operators/{id}/plan': { plan: 'enterprise' },
    'post /api/venues': { name: `fuzz ${n}`, timezone: 'Europe/Berlin' },
    'put /api/venues/{id}': { name: `fuzz ${n}`, lat: 52.5, lng: 13.4 },
    'post /api/venues/{id}/zones': { slug: `z${n}`, name: `zone ${n}`, type: 'entrance', capacity: 50 },
    'put /api/venues/{id}/zones/{zoneId}': { name: `zone ${n}`, capacity: 40 },
    'post /api/venues/{id}/integrations': { connector_type: 'density', config: { api_token: `tok-${n}` } },
    'put /api/venues/{id}/integrations/{integrationId}': { config: { api_token: `tok-${n}` } },
    'post /ingest': {
      venue_id: n % 3 === 0 ? victim.venueId : myVenueId,
      connector_type: 'density',
      events: [
        { type: 'entry', timestamp: new Date(Date.now() - 60_000).toISOString(), payload: { space_id: 'spc_1', doorway_id: 'drw_1' } },
      ],
    },
    'put /api/venues/{id}/alarm-rules': { zone_occupancy: { warning_percent: 80 } },
  })[`${op.method} ${op.path}`];

/** A body built around the operation's own fields (so validation and handlers are reached), or plain junk. */
const bodyArb = (op: AnyOperation): fc.Arbitrary<{ body: Buffer; type: string } | undefined> => {
  const keys = [...shapeKeys(op.body), 'connector_type', 'config', 'venue_id', 'events', 'name', 'timezone', 'zone_occupancy'];
  const fieldValue = fc.oneof(
    { weight: 3, arbitrary: junkValue },
    { weight: 1, arbitrary: idArb },
    { weight: 1, arbitrary: fc.constantFrom('meraki', 'density', 'square', 'UTC', 'Europe/Berlin', 'area', 'pro', 'enterprise') },
    {
      weight: 1,
      arbitrary: fc.dictionary(
        fc.constantFrom('api_key', 'org_id', 'api_token', 'password', 'zone_id', 'capacity', 'threshold'),
        junkValue,
        { maxKeys: 3 },
      ),
    },
  );
  const shaped = fc.dictionary(fc.constantFrom(...keys), fieldValue, { minKeys: 1, maxKeys: 6 }).map((o) => Buffer.from(JSON.stringify(o)));
  const valid = fc.tuple(fc.nat(), fc.option(fc.tuple(fc.constantFrom(...keys), fieldValue), { freq: 2 })).map(([n, change]) => {
    const body = validBody(op, n);
    return Buffer.from(JSON.stringify(change ? { ...body, [change[0]]: change[1] } : (body ?? {})));
  });
  const junk: Array<fc.WeightedArbitrary<Buffer>> = [
    { weight: 5, arbitrary: shaped },
    { weight: 1, arbitrary: junkValue.map((v) => Buffer.from(JSON.stringify(v) ?? 'null')) },
    { weight: 2, arbitrary: rawJunkBody },
  ];
  const json = fc.oneof(...(validBody(op, 0) ? [{ weight: 6, arbitrary: valid }, ...junk] : junk));
  const withBody: fc.Arbitrary<{ body: Buffer; type: string }> = fc.record({
    body: json,
    type: fc.oneof({ weight: 4, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: fc.constantFrom(...CONTENT_TYPES) }),
  });
  return op.method === 'get' || op.method === 'delete' ? fc.option(withBody, { freq: 5 }).map((b) => b ?? undefined) : withBody;
};

/** Headers: the right credentials mostly, junk ones sometimes, duplicates and odd extras. */
const headersArb = () =>
  fc
    .record({
      auth: fc.constantFrom('right', 'right', 'right', 'right', 'junk', 'none', 'duplicate'),
      junkAuth: junkHeaderValue,
      extras: fc.oneof(
        fc.constant([] as Array<[string, string]>),
        fc.array(
          fc.tuple(
            fc.constantFrom(
              'Idempotency-Key',
              'X-Request-Id',
              'Accept',
              'Accept-Encoding',
              'Content-Encoding',
              'Content-Type',
              'X-Forwarded-For',
              'Origin',
              'Cookie',
              'X-Admin-Key',
              'If-None-Match',
              'Range',
              'X-Weird',
            ),
            fc.oneof(junkHeaderValue, fc.constantFrom(...CONTENT_ENCODINGS), fc.constantFrom(...CONTENT_TYPES)),
          ),
          { minLength: 1, maxLength: 3 },
        ),
      ),
    })
    .map(({ auth, junkAuth, extras }) => ({ auth, junkAuth, extras }));

function credentials(op: AnyOperation, auth: string, junk: string): Array<[string, string]> {
  const right: Array<[string, string]> =
    op.auth === 'admin' ? [['X-Admin-Key', adminKey()]] : op.auth === 'bearer' ? [['Authorization', `Bearer ${me.key}`]] : [];
  const wrong: Array<[string, string]> = op.auth === 'admin' ? [['X-Admin-Key', junk]] : [['Authorization', junk]];
  if (auth === 'right') return right;
  if (auth === 'junk') return wrong;
  if (auth === 'duplicate') return [...right, ...wrong, ...right];
  return [];
}

describe('fuzzing every REST operation (fast-check, seed FUZZ_SEED)', () => {
  it('answers generated junk on every operation with a success or the envelope, in bounded time, never with another operator’s data', async () => {
    expect(OPERATIONS.length).toBeGreaterThan(30);
    const statuses = new Map<number, number>();
    for (const op of OPERATIONS) {
      await ensureMine();
      const input = fc.record({
        params: fc.array(segmentArb, { minLength: 4, maxLength: 4 }),
        query: queryArb(op),
        body: bodyArb(op),
        headers: headersArb(),
      });
      await checkProperty(
        fc.asyncProperty(input, async ({ params, query, body, headers }) => {
          let i = 0;
          const path = op.path.replace(/\{\w+\}/g, () => params[i++]!) + query;
          const sent: Array<[string, string]> = [...credentials(op, headers.auth, headers.junkAuth), ...headers.extras];
          if (body && !sent.some(([k]) => k.toLowerCase() === 'content-type')) sent.push(['Content-Type', body.type]);
          const res = await rawRequest(api.url, { method: op.method.toUpperCase(), path, headers: sent, body: body?.body });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          const what = `${op.method.toUpperCase()} ${path.slice(0, 200)} → ${res.status} ${res.text.slice(0, 300)}`;
          expect(res.status, what).toBeLessThan(500);
          if (res.status >= 400) expect(isEnvelope(res.text), `no envelope: ${what}`).toBe(true);
          const leaks = leaksOf(
            victim,
            `${path} ${sent.map((h) => h.join(':')).join(' ')} ${body?.body.toString('utf8') ?? ''}`,
            res.text + JSON.stringify(res.headers),
          );
          expect(leaks, `leak: ${what}`).toEqual([]);
          // The fuzzer may rotate its own key (itself or through the admin route): keep the new one.
          if (
            res.status === 200 &&
            /"api_key"/.test(res.text) &&
            (op.id === 'rotateKey' || (op.id === 'rotateOperatorKey' && path.toLowerCase().includes(me.id)))
          ) {
            me = { ...me, key: (JSON.parse(res.text) as { api_key: string }).api_key };
          }
        }),
        RUNS_PER_OPERATION,
      );
    }
    // The junk reached every layer: successes, validation, authentication, ownership and existence answers.
    console.log('fuzz-rest statuses', Object.fromEntries(statuses));
    for (const status of [200, 201, 202, 400, 401, 403, 404])
      expect(statuses.get(status) ?? 0, `answers with ${status}`).toBeGreaterThan(0);
    // Still serving, and the victim's data is intact for its owner.
    const own = await request(`${api.url}/api/venues/${victim.venueId}`, { key: victim.op.key });
    expect([200, 401]).toContain(own.status);
    expect((await request(`${api.url}/health`)).status).toBe(200);
    // About 3,200 requests one after another, each bounded at 10 s by rawRequest: 16 s alone, over
    // 60 s once in a full run beside another file, so the default test timeout is not the bound.
  }, 240_000);

  it('answers duplicate and odd request headers on authenticated reads without a 5xx', async () => {
    await checkProperty(
      fc.asyncProperty(
        fc.array(
          fc.tuple(
            fc.constantFrom('Authorization', 'Content-Type', 'Accept', 'X-Request-Id', 'Content-Encoding', 'Idempotency-Key'),
            junkHeaderValue,
          ),
          { minLength: 1, maxLength: 8 },
        ),
        async (extra) => {
          const res = await rawRequest(api.url, {
            method: 'GET',
            path: '/api/venues',
            headers: [['Authorization', `Bearer ${me.key}`], ...extra],
          });
          expect(res.status, res.text).toBeLessThan(500);
          if (res.status >= 400) expect(isEnvelope(res.text), res.text).toBe(true);
          expect(leaksOf(victim, '', res.text)).toEqual([]);
        },
      ),
      60,
    );
  });
});
