import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../../lib/validate.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { freshWindow } from '../support/windows.js';

/** Regressions from the security pass (docs/security.md): each failed before its fix. */
let api: RunningApi;
let limited: RunningApi;
let op: TestOperator;
const admin = () => ({ 'x-admin-key': api.services.cfg.ADMIN_SECRET });
const nested = (n: number) => '['.repeat(n) + ']'.repeat(n);

beforeAll(async () => {
  [api, limited] = await Promise.all([startApi(), startApi(testConfig({ UNAUTHENTICATED_RATE_LIMIT: '5' }))]);
  op = await newOperator(api, 'pro');
});
afterAll(async () => {
  await Promise.all([api.close(), limited.close()]);
});

describe('cheap refusals before expensive work', () => {
  const bomb = nested(1_040_000);

  it('never reads a body for an unknown path or a request without a valid key', async () => {
    const unknown = await request(`${api.url}/no/such/path`, { rawBody: bomb, headers: { 'content-type': 'application/json' } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('NOT_FOUND');
    for (const key of [undefined, 'vt_live_not-a-real-key-0000000000000']) {
      const res = await request(`${api.url}/api/venues`, { key, rawBody: bomb, headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('UNAUTHORIZED');
    }
  });

  it('refuses JSON nested deeper than the limit with a 400, without parsing it, and still serves', async () => {
    const res = await request(`${api.url}/api/venues`, { key: op.key, rawBody: bomb, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: `request body is nested deeper than ${MAX_JSON_DEPTH} levels`,
      code: 'VALIDATION_ERROR',
      details: [{ field: 'body', message: expect.any(String) }],
    });
    // Brackets inside strings are text, not nesting.
    const inString = await request(`${api.url}/api/venues`, { key: op.key, json: { name: '['.repeat(10_000), timezone: 'UTC' } });
    expect(inString.status).toBe(400);
    expect(inString.body.details).toEqual([{ field: 'name', message: expect.any(String) }]);
    expect((await request(`${api.url}/api/status`)).status).toBe(200);
  });

  it('limits refused keys per client address: past the budget a 429 with Retry-After, a valid key still served', async () => {
    const target = await newOperator(limited, 'pro');
    await freshWindow();
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      // Earlier X-Forwarded-For entries are the client's to forge; only the proxy's last one counts.
      const res = await request(`${limited.url}/api/venues`, {
        key: `vt_live_${'x'.repeat(28)}`,
        headers: { 'x-forwarded-for': `203.0.113.${i}, 198.51.100.7` },
      });
      statuses.push(res.status);
      if (res.status === 429) {
        expect(res.body.code).toBe('RATE_LIMITED');
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      }
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429]);
    const adminRefused = await request(`${limited.url}/api/operators`, {
      headers: { 'x-admin-key': 'wrong-secret-wrong', 'x-forwarded-for': '198.51.100.7' },
      json: {},
    });
    expect(adminRefused.status).toBe(429);
    const ok = await request(`${limited.url}/api/venues`, { key: target.key, headers: { 'x-forwarded-for': '198.51.100.7' } });
    expect(ok.status).toBe(200);
    const elsewhere = await request(`${limited.url}/api/venues`, { headers: { 'x-forwarded-for': '198.51.100.8' } });
    expect(elsewhere.status).toBe(401);
  });
});

describe('well-formed Unicode', () => {
  it('answers a lone surrogate in an integration config with a field-level 400', async () => {
    const venue = await newVenue(api, op.key);
    const res = await request(`${api.url}/api/venues/${venue.id}/integrations`, {
      key: op.key,
      rawBody: '{"connector_type":"meraki","config":{"api_key":"k\\ud800","org_id":"1\\udc00"}}',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_ERROR');
    expect(res.body.details).toEqual([{ field: 'config.api_key', message: expect.stringContaining('lone surrogate') }]);
    expect(JSON.stringify(res.body)).not.toContain('k\\ud800');
  });

  it('refuses a lone surrogate in stored text instead of storing U+FFFD', async () => {
    const res = await request(`${api.url}/api/venues`, {
      key: op.key,
      rawBody: '{"name":"caf\\udce9","timezone":"UTC"}',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([{ field: 'name', message: expect.stringContaining('lone surrogate') }]);
    const pair = await request(`${api.url}/api/venues`, {
      key: op.key,
      rawBody: '{"name":"caf\\ud83d\\ude00","timezone":"UTC"}',
      headers: { 'content-type': 'application/json' },
    });
    expect(pair.status).toBe(201);
    expect(pair.body.name).toBe('caf😀');
  });

  it('refuses bytes that are not UTF-8', async () => {
    const res = await fetch(`${api.url}/api/venues`, {
      method: 'POST',
      headers: { authorization: `Bearer ${op.key}`, 'content-type': 'application/json' },
      body: Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xe9]), Buffer.from('","timezone":"UTC"}')]),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: 'request body is not valid UTF-8',
      code: 'VALIDATION_ERROR',
      details: [{ field: 'body', message: expect.any(String) }],
    });
    // An encoded surrogate (ED A0 80) is not UTF-8 either.
    const surrogate = await fetch(`${api.url}/api/venues`, {
      method: 'POST',
      headers: { authorization: `Bearer ${op.key}`, 'content-type': 'application/json' },
      body: Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('","timezone":"UTC"}')]),
    });
    expect(surrogate.status).toBe(400);
  });

  it('reads a body that starts with a byte-order mark', async () => {
    const res = await fetch(`${api.url}/api/venues`, {
      method: 'POST',
      headers: { authorization: `Bearer ${op.key}`, 'content-type': 'application/json' },
      body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"name":"bom","timezone":"UTC"}')]),
    });
    expect(res.status).toBe(201);
  });
});

describe('strict parsing', () => {
  it('takes only plain decimal digits for integer query parameters, within sane bounds', async () => {
    for (const query of [
      'limit=0x10',
      'limit=1e2',
      'offset=%2010',
      'offset=1e12',
      'offset=',
      'limit=',
      'limit=-1',
      'limit=+5',
      'limit=5.0',
      'offset=1000001',
    ]) {
      const res = await request(`${api.url}/api/venues?${query}`, { key: op.key });
      expect(res.status, query).toBe(400);
      expect(res.body.code, query).toBe('VALIDATION_ERROR');
      expect(res.body.details[0].field, query).toBe(query.split('=')[0]);
    }
    const keys = await request(`${api.url}/api/keys?limit=1e1`, { key: op.key });
    expect(keys.status).toBe(400);
    const ok = await request(`${api.url}/api/venues?limit=007&offset=0`, { key: op.key });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ limit: 7, offset: 0 });
  });

  it('answers compressed bodies and other charsets with 415 in the envelope', async () => {
    const json = JSON.stringify({ name: 'gz', timezone: 'UTC' });
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const res = await fetch(`${api.url}/api/venues`, {
        method: 'POST',
        headers: { authorization: `Bearer ${op.key}`, 'content-type': 'application/json', 'content-encoding': encoding },
        body: gzipSync(json),
      });
      expect(res.status, encoding).toBe(415);
      const body = (await res.json()) as { code: string; error: string };
      expect(body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
      expect(body.error).toContain(encoding);
    }
    const latin1 = await request(`${api.url}/api/venues`, {
      key: op.key,
      rawBody: json,
      headers: { 'content-type': 'application/json; charset=iso-8859-1' },
    });
    expect(latin1.status).toBe(415);
    const utf8 = await request(`${api.url}/api/venues`, {
      key: op.key,
      rawBody: json,
      headers: { 'content-type': 'application/json; charset=UTF-8' },
    });
    expect(utf8.status).toBe(201);
  });

  it('refuses unknown keys in the operator body like every other body', async () => {
    const res = await request(`${api.url}/api/operators`, {
      headers: admin(),
      json: { name: 'x', email: 'x@example.com', plan: 'free', role: 'admin' },
    });
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([{ field: '(root)', message: expect.stringContaining('role') }]);
  });
});

describe('display text: names and labels are one line without bidi formatting (issue 29)', () => {
  const cases: Array<[string, string, string]> = [
    ['a right-to-left override', 'Invoice \u202Efdp.exe', 'U+202E'],
    ['a first-strong isolate', 'Hall \u2068A', 'U+2068'],
    ['an Arabic letter mark', 'Hall\u061C A', 'U+061C'],
    ['a NUL', 'Hall\u0000A', 'U+0000'],
    ['a newline', 'Hall\nA', 'U+000A'],
    ['a C1 control', 'Hall\u0085A', 'U+0085'],
  ];
  const ordinary = 'Café Zürich – 東京 😀';
  const expectRefused = (res: Awaited<ReturnType<typeof request>>, field: string, codePoint: string) => {
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body).toEqual({
      error: `invalid body: check ${field}`,
      code: 'VALIDATION_ERROR',
      details: [{ field, message: expect.stringContaining(codePoint) }],
    });
    expect(res.body.details[0].message).toMatch(
      /^must (be one line of plain text|not contain bidirectional formatting characters): remove /,
    );
  };

  it.each(cases)(
    'refuses %s in a venue name and address, a zone name and an operator name with a 400 naming the field',
    async (_case, text, codePoint) => {
      expectRefused(await request(`${api.url}/api/venues`, { key: op.key, json: { name: text, timezone: 'UTC' } }), 'name', codePoint);
      expectRefused(
        await request(`${api.url}/api/venues`, { key: op.key, json: { name: 'ok', timezone: 'UTC', address: text } }),
        'address',
        codePoint,
      );
      const venue = await newVenue(api, op.key);
      expectRefused(
        await request(`${api.url}/api/venues/${venue.id}`, { key: op.key, method: 'PUT', json: { name: text } }),
        'name',
        codePoint,
      );
      expectRefused(
        await request(`${api.url}/api/venues/${venue.id}/zones`, { key: op.key, json: { slug: 'hall', name: text, type: 'area' } }),
        'name',
        codePoint,
      );
      expectRefused(
        await request(`${api.url}/api/operators`, { headers: admin(), json: { name: text, email: 'bidi@example.com' } }),
        'name',
        codePoint,
      );
    },
  );

  it('refuses bidi formatting in a plain integration config field, and names where the character is', async () => {
    const venue = await newVenue(api, op.key);
    const res = await request(`${api.url}/api/venues/${venue.id}/integrations`, {
      key: op.key,
      json: { connector_type: 'meraki', config: { api_key: 'k', org_id: '54\u202E9236' } },
    });
    expectRefused(res, 'config.org_id', 'U+202E at character 3');
  });

  it('still accepts ordinary non-ASCII names and stores them as sent', async () => {
    const venue = await request(`${api.url}/api/venues`, {
      key: op.key,
      json: { name: ordinary, timezone: 'UTC', address: 'Bahnhofstrasse 1, 8001 Zürich' },
    });
    expect(venue.status, JSON.stringify(venue.body)).toBe(201);
    expect(venue.body.name).toBe(ordinary);
    // Right-to-left scripts need no formatting characters.
    const zone = await request(`${api.url}/api/venues/${venue.body.id}/zones`, {
      key: op.key,
      json: { slug: 'hall', name: 'قاعة المدخل', type: 'area' },
    });
    expect(zone.status, JSON.stringify(zone.body)).toBe(201);
    expect(zone.body.name).toBe('قاعة المدخل');
    const operator = await request(`${api.url}/api/operators`, { headers: admin(), json: { name: ordinary, email: 'cafe@example.com' } });
    expect(operator.status, JSON.stringify(operator.body)).toBe(201);
    // Surrounding whitespace is still trimmed, not refused.
    const trimmed = await request(`${api.url}/api/venues/${venue.body.id}`, {
      key: op.key,
      method: 'PUT',
      json: { name: `  ${ordinary}\n` },
    });
    expect(trimmed.status, JSON.stringify(trimmed.body)).toBe(200);
    expect(trimmed.body.name).toBe(ordinary);
  });
});
