import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES } from '../../apps/api/middleware/body.js';
import { toAppError } from '../../apps/api/middleware/errors.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request, type JsonResponse } from '../support/http.js';
import { newOperator, newVenue, registeredRoutes, type TestOperator } from '../support/tenants.js';

let api: RunningApi;
let admin: Record<string, string>;
let op: TestOperator;
beforeAll(async () => {
  // Limits off and an Enterprise operator, so the fuzzing below reaches the handlers every time.
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  admin = { 'x-admin-key': api.services.cfg.ADMIN_SECRET };
  op = await newOperator(api, 'enterprise');
});
afterAll(async () => {
  await api.close();
});

describe('the error envelope', () => {
  it('answers an unknown route with 404 NOT_FOUND, with or without a key', async () => {
    for (const key of [undefined, op.key]) {
      const res = await request(`${api.url}/api/nothing-here`, { key });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: expect.stringContaining('/api/nothing-here'), code: 'NOT_FOUND' });
    }
  });

  it('answers a wrong method with 405 METHOD_NOT_ALLOWED and an Allow header, before authentication', async () => {
    const res = await request(`${api.url}/api/keys`, { method: 'DELETE' });
    expect(res.status).toBe(405);
    expect(res.body).toEqual({ error: expect.any(String), code: 'METHOD_NOT_ALLOWED', details: { allowed: ['HEAD', 'GET'] } });
    expect(res.headers.get('allow')).toBe('HEAD, GET');
    const post = await request(`${api.url}/api/usage`, { key: op.key, json: {} });
    expect(post.status).toBe(405);
    const unknown = await request(`${api.url}/api/keys`, { method: 'PROPFIND' });
    expect(unknown.status).toBe(501);
    expect(unknown.body).toEqual({ error: expect.any(String), code: 'METHOD_NOT_ALLOWED' });
  });

  it('answers malformed JSON with 400 VALIDATION_ERROR naming the body', async () => {
    for (const raw of ['{', '{"name": }', "{'a': 1}", 'nul', '[1,]']) {
      const res = await request(`${api.url}/api/operators`, { headers: { ...admin, 'content-type': 'application/json' }, rawBody: raw });
      expect(res.status, raw).toBe(400);
      expect(res.body).toEqual({
        error: 'request body is not valid JSON',
        code: 'VALIDATION_ERROR',
        details: [{ field: 'body', message: expect.any(String) }],
      });
    }
  });

  it('answers a non-JSON content type with 400, and accepts +json types', async () => {
    const body = JSON.stringify({ name: 'ct', email: 'ct@example.com' });
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await request(`${api.url}/api/operators`, { headers: { ...admin, 'content-type': type }, rawBody: body });
      expect(res.status, type).toBe(400);
      expect(res.body.code).toBe('VALIDATION_ERROR');
      expect(res.body.details[0].message).toContain(type);
    }
    const ok = await request(`${api.url}/api/operators`, {
      headers: { ...admin, 'content-type': 'application/vnd.api+json' },
      rawBody: body,
    });
    expect(ok.status).toBe(201);
  });

  it('names every bad field in VALIDATION_ERROR details', async () => {
    const body = await request(`${api.url}/api/operators`, { headers: admin, json: { name: 7, email: [], plan: null } });
    expect(body.status).toBe(400);
    expect(body.body.details).toEqual([
      { field: 'name', message: expect.any(String) },
      { field: 'email', message: expect.any(String) },
      { field: 'plan', message: expect.any(String) },
    ]);
    const query = await request(`${api.url}/api/keys?limit=abc`, { key: op.key });
    expect(query.status).toBe(400);
    expect(query.body.details).toEqual([{ field: 'limit', message: expect.any(String) }]);
  });

  it('refuses the NUL character, which Postgres text and jsonb cannot hold, with 400 naming the field', async () => {
    const venueId: string = (await newVenue(api, op.key, { name: 'NUL' })).id;
    const cases: Array<[method: string, path: string, json: unknown, field: string]> = [
      ['POST', '/api/operators', { name: 'a\u0000b', email: 'nul@example.com' }, 'name'],
      ['POST', '/api/venues', { name: 'a\u0000b', timezone: 'UTC' }, 'name'],
      ['POST', '/api/venues', { name: 'ok', timezone: 'UTC', address: 'x\u0000' }, 'address'],
      ['PUT', `/api/venues/${venueId}`, { name: '\u0000' }, 'name'],
      ['POST', `/api/venues/${venueId}/zones`, { slug: 'nul', name: 'a\u0000', type: 'area' }, 'name'],
      [
        'POST',
        `/api/venues/${venueId}/integrations`,
        { connector_type: 'meraki', config: { api_key: 'k', org_id: 'o\u0000' } },
        'config.org_id',
      ],
      [
        'POST',
        `/api/venues/${venueId}/integrations`,
        { connector_type: 'unifi', config: { controller_url: 'https://unifi.example.com/\u0000', username: 'u', password: 'p' } },
        'config.controller_url',
      ],
    ];
    for (const [method, path, json, field] of cases) {
      const auth = path === '/api/operators' ? { headers: admin } : { key: op.key };
      const res = await request(`${api.url}${path}`, { method, json, ...auth });
      expect(res.status, `${method} ${path}`).toBe(400);
      expect(res.body.details, `${method} ${path}`).toEqual([{ field, message: expect.stringContaining('NUL') }]);
    }
  });

  it('turns data errors that reach Postgres into 400/409, not 500', () => {
    const pgError = (code: string) => Object.assign(new pg.DatabaseError('boom', 0, 'error'), { code });
    expect(toAppError(pgError('22P02'))).toMatchObject({ status: 400, code: 'VALIDATION_ERROR' });
    expect(toAppError(pgError('22003'))).toMatchObject({ status: 400, code: 'VALIDATION_ERROR' });
    expect(toAppError(pgError('23505'))).toMatchObject({ status: 409, code: 'CONFLICT' });
    expect(toAppError(pgError('08006'))).toMatchObject({ status: 503, code: 'SERVICE_UNAVAILABLE', headers: { 'Retry-After': '5' } });
    expect(toAppError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }))).toMatchObject({
      status: 503,
      code: 'SERVICE_UNAVAILABLE',
    });
    expect(toAppError(new Error('Connection terminated unexpectedly'))).toMatchObject({ status: 503, code: 'SERVICE_UNAVAILABLE' });
    expect(toAppError(pgError('42P01'))).toMatchObject({ status: 500, code: 'INTERNAL_ERROR' });
    expect(toAppError(new Error('x'))).toMatchObject({ status: 500, code: 'INTERNAL_ERROR' });
    expect(toAppError(Object.assign(new Error('teapot'), { status: 418, expose: true }))).toMatchObject({
      status: 400,
      code: 'VALIDATION_ERROR',
      message: 'teapot',
    });
    expect(toAppError(Object.assign(new Error('upstream'), { status: 404 }))).toMatchObject({ status: 500, code: 'INTERNAL_ERROR' });
    expect(toAppError(null)).toMatchObject({ status: 500, code: 'INTERNAL_ERROR' });
  });
});

/** A raw HTTP/1.1 exchange: what the server wrote, and whether and when it closed the socket. */
function rawExchange(url: string, head: string, body: Buffer, chunked: boolean): Promise<{ response: string; closedAfterMs: number }> {
  const { port, hostname } = new URL(url);
  const started = Date.now();
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let response = '';
    const done = () => resolve({ response, closedAfterMs: Date.now() - started });
    socket.on('data', (d) => (response += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', done);
    socket.write(head);
    let offset = 0;
    const pump = () => {
      while (offset < body.length && !socket.destroyed) {
        const chunk = body.subarray(offset, offset + 64 * 1024);
        offset += chunk.length;
        const framed = chunked ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]) : chunk;
        if (!socket.write(framed)) return void socket.once('drain', pump);
      }
      if (chunked && !socket.destroyed) socket.write('0\r\n\r\n');
    };
    pump();
  });
}

describe('oversized bodies', () => {
  const big = Buffer.alloc(MAX_BODY_BYTES + 1024 * 1024, 'a');
  const head = (framing: string) =>
    `POST /api/operators HTTP/1.1\r\nHost: x\r\nX-Admin-Key: ${api.services.cfg.ADMIN_SECRET}\r\nContent-Type: application/json\r\n${framing}\r\n\r\n`;

  it('answers a declared oversized length with 413 at once and closes the connection instead of draining it', async () => {
    const { response, closedAfterMs } = await rawExchange(api.url, head(`Content-Length: ${big.length}`), big, false);
    expect(response).toMatch(/^HTTP\/1\.1 413 /);
    expect(response.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4))).toEqual({
      error: expect.stringContaining(`${MAX_BODY_BYTES} bytes`),
      code: 'PAYLOAD_TOO_LARGE',
      details: { limitBytes: MAX_BODY_BYTES },
    });
    expect(closedAfterMs).toBeLessThan(3000);
  });

  it('stops a streamed (chunked) body at the limit with 413 and closes the connection', async () => {
    const { response, closedAfterMs } = await rawExchange(api.url, head('Transfer-Encoding: chunked'), big, true);
    expect(response).toMatch(/^HTTP\/1\.1 413 /);
    expect(response).toContain('"code":"PAYLOAD_TOO_LARGE"');
    expect(closedAfterMs).toBeLessThan(3000);
  });

  it('gives a fetch client the 413 envelope for a buffered and for a streamed body, and keeps serving', async () => {
    const buffered = await fetch(`${api.url}/api/operators`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: big,
    });
    expect(buffered.status).toBe(413);
    expect(((await buffered.json()) as { code: string }).code).toBe('PAYLOAD_TOO_LARGE');
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 48; i++) c.enqueue(new Uint8Array(64 * 1024));
        c.close();
      },
    });
    const streamed = await fetch(`${api.url}/api/operators`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect((await request(`${api.url}/health`)).status).toBe(200);
  });

  it('survives a client that disconnects mid-body', async () => {
    const { port, hostname } = new URL(api.url);
    await new Promise<void>((resolve) => {
      const socket = net.connect(Number(port), hostname, () => {
        socket.write(`POST /api/operators HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":`);
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 50);
      });
    });
    expect((await request(`${api.url}/health`)).status).toBe(200);
  });

  it('accepts a body of exactly the limit (then validates it)', async () => {
    const prefix = '{"name":"';
    const suffix = '","email":"x@example.com"}';
    const raw = prefix + 'n'.repeat(MAX_BODY_BYTES - prefix.length - suffix.length) + suffix;
    expect(Buffer.byteLength(raw)).toBe(MAX_BODY_BYTES);
    const res = await request(`${api.url}/api/operators`, { headers: { ...admin, 'content-type': 'application/json' }, rawBody: raw });
    expect(res.status).toBe(400);
    expect(res.body.details[0].field).toBe('name');
  });
});

/** Deterministic PRNG (mulberry32), so a failing fuzz case can be replayed. */
function prng(seed: number): () => number {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const JUNK_SEGMENTS = [
  'x',
  '0',
  '-1',
  '1e999',
  'null',
  '%00',
  '%E0%A4%A',
  '%2e%2e',
  "'%20OR%201=1--",
  'a'.repeat(300),
  '%F0%9F%99%82',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  'ZZZZZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZZZZZZZZZ',
];
const JUNK_QUERIES = [
  '',
  '?limit=-1',
  '?limit=abc&offset=-5',
  '?limit=1e309&offset=1.5',
  '?limit=99999999999999999999',
  '?limit=1&limit=2',
  '?offset=NaN',
  '?range=%00',
  '?range=7d&range=30d',
  '?keys=occupancy,nope&startTs=abc&endTs=1e400&interval=0&agg=XYZ',
  '?keys=&startTs=-1&endTs=-2',
  '?keys=occupancy&startTs=0&endTs=9999999999999999&interval=1',
  '?dayOfWeek=7&hour=24',
  '?dayOfWeek=-1&hour=1.5',
  '?status=NOPE&severity=x&venue_id=zz',
  `?q=${'x'.repeat(4000)}`,
  '?__proto__[x]=1&constructor=1',
];
const JUNK_VALUES: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  -0,
  1e308,
  -1e308,
  2 ** 63,
  '',
  ' ',
  'x'.repeat(10_000),
  '\u0000',
  '🙂',
  '2024-13-45T99:99:99Z',
  'not-a-uuid',
  '00000000-0000-0000-0000-000000000000',
  [],
  [null],
  [{}],
  {},
  { a: { b: { c: [] } } },
  JSON.parse('{"__proto__":{"x":1}}'),
];
const JUNK_KEYS = [
  'name',
  'email',
  'plan',
  'timezone',
  'lat',
  'lng',
  'address',
  'hardware_type',
  'slug',
  'type',
  'capacity',
  'connector_type',
  'config',
  'venue_id',
  'events',
  'operator_id',
  'id',
  'is_active',
  '__proto__',
  'constructor',
];

describe('fuzzing every registered route', () => {
  it('never answers junk with a 5xx, and always with the envelope', async () => {
    const rand = prng(20_251_121);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
    // A real venue id among the junk, so venue-scoped routes get past the ownership check too.
    const venueId: string = (await newVenue(api, op.key, { name: 'Fuzz' })).id;
    let key = op.key;

    const junkBody = (): { raw: string; type: string } => {
      const r = rand();
      if (r < 0.1) return { raw: pick(['{', '{"a":', 'nan', '[1,,2]', '\u0000', '{"a":1}{"b":2}']), type: 'application/json' };
      if (r < 0.15) return { raw: '{"name":"x"}', type: pick(['text/plain', 'application/xml', 'multipart/form-data; boundary=x', '']) };
      if (r < 0.25) return { raw: JSON.stringify(pick(JUNK_VALUES)), type: 'application/json' };
      if (r < 0.3) return { raw: '['.repeat(5000) + ']'.repeat(5000), type: 'application/json' };
      if (r < 0.35)
        return {
          raw: `{"events":[${Array.from({ length: 1001 }, () => '{"type":"entry","timestamp":"x","payload":{}}').join(',')}]}`,
          type: 'application/json',
        };
      const obj: Record<string, unknown> = {};
      const n = 1 + Math.floor(rand() * 6);
      for (let i = 0; i < n; i++) obj[pick(JUNK_KEYS)] = pick(JUNK_VALUES);
      if (rand() < 0.3) obj.venue_id = venueId;
      if (rand() < 0.3)
        obj.events = Array.from({ length: 3 }, () => ({
          type: pick(JUNK_VALUES),
          timestamp: pick(JUNK_VALUES),
          payload: pick(JUNK_VALUES),
        }));
      return { raw: JSON.stringify(obj), type: 'application/json; charset=utf-8' };
    };

    const failures: string[] = [];
    const routes = registeredRoutes(api).filter((r) => r.method !== 'OPTIONS');
    expect(routes.length).toBeGreaterThan(5);
    for (const route of routes) {
      for (let i = 0; i < 30; i++) {
        const path = route.path.replace(/:\w+/g, () => (rand() < 0.3 ? venueId : pick(JUNK_SEGMENTS))) + pick(JUNK_QUERIES);
        const headers: Record<string, string> = route.path.startsWith('/api/operators') ? { ...admin } : { authorization: `Bearer ${key}` };
        if (rand() < 0.1) headers['x-request-id'] = pick(['', '../../etc', 'x'.repeat(200), '🙂'].map(encodeURIComponent));
        const withBody = ['POST', 'PUT', 'PATCH'].includes(route.method) || (route.method === 'DELETE' && rand() < 0.2);
        const body = withBody ? junkBody() : undefined;
        if (body?.type) headers['content-type'] = body.type;
        let res: JsonResponse;
        try {
          res = await request(`${api.url}${path}`, { method: route.method, headers, rawBody: body?.raw });
        } catch (err) {
          failures.push(`${route.method} ${path.slice(0, 120)}: ${(err as Error).message}`);
          continue;
        }
        const what = `${route.method} ${path.slice(0, 120)} ${body?.raw.slice(0, 120) ?? ''} → ${res.status} ${JSON.stringify(res.body)?.slice(0, 200)}`;
        if (res.status >= 500) failures.push(what);
        else if (
          res.status >= 400 &&
          route.path !== '/mcp' &&
          !(res.body && typeof res.body.error === 'string' && typeof res.body.code === 'string')
        )
          failures.push(`no envelope: ${what}`);
        // Keep a working key when the fuzzer happens to rotate it.
        if (res.status === 200 && route.path === '/api/keys/rotate') key = res.body.api_key;
      }
    }
    expect(failures).toEqual([]);
  });

  it('never answers junk headers on the public endpoints with a 5xx', async () => {
    for (const headers of [
      { authorization: 'Bearer \u00ff' },
      { 'content-type': 'application/json' },
      { 'x-request-id': 'a b' },
      { accept: 'text/html' },
    ]) {
      for (const path of ['/health', '/api/status', '/openapi.json']) {
        const res = await request(`${api.url}${path}`, {
          headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, encodeURI(v)])),
        });
        expect(res.status, path).toBe(200);
      }
    }
  });
});
