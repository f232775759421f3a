import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES } from '../../apps/api/middleware/body.js';
import { repoPath } from '../../lib/paths.js';
import { LOG_FILES, writeFrontDoor } from '../../scripts/stack/nginx.mjs';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { freePort, startDeployFrontDoor, startFrontDoor, type FrontDoor } from '../support/frontdoor.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** Parses one HTTP/1.1 response (Content-Length or chunked body). */
function parse(buf: Buffer): RawResponse | null {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const [statusLine = '', ...lines] = buf.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    const name = line.slice(0, i).trim().toLowerCase();
    headers[name] = headers[name] ? `${headers[name]}, ${line.slice(i + 1).trim()}` : line.slice(i + 1).trim();
  }
  let rest = buf.subarray(end + 4);
  if (headers['transfer-encoding'] === 'chunked') {
    const parts: Buffer[] = [];
    for (;;) {
      const eol = rest.indexOf('\r\n');
      if (eol < 0) return null;
      const size = parseInt(rest.subarray(0, eol).toString('latin1'), 16);
      if (size === 0) break;
      if (rest.length < eol + 2 + size + 2) return null;
      parts.push(rest.subarray(eol + 2, eol + 2 + size));
      rest = rest.subarray(eol + 2 + size + 2);
    }
    rest = Buffer.concat(parts);
  } else if (headers['content-length'] !== undefined) {
    const len = Number(headers['content-length']);
    if (rest.length < len) return null;
    rest = rest.subarray(0, len);
  }
  const text = rest.toString('utf8');
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON: the assertion on body says so */
  }
  return { status: Number(statusLine.split(' ')[1]), headers, text, body };
}

/**
 * Sends bytes exactly as given (duplicate headers, methods fetch refuses, broken request lines) and
 * reads the first response. A write error after the server answered (it refused a large body) is fine.
 */
function raw(port: number, head: string, body?: Buffer): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => finish(new Error(`no complete answer within 20 s:\n${got.toString('latin1').slice(0, 500)}`)), 20_000);
    const finish = (err?: Error) => {
      clearTimeout(timer);
      socket.destroy();
      const res = parse(got);
      if (res) resolve(res);
      else reject(err ?? new Error(`incomplete answer:\n${got.toString('latin1').slice(0, 500)}`));
    };
    socket.on('data', (c: Buffer) => {
      got = Buffer.concat([got, c]);
      if (parse(got)) finish();
    });
    socket.on('end', () => finish());
    socket.on('error', (err) => finish(err));
    socket.write(head);
    if (body) socket.write(body);
  });
}

const CRLF = '\r\n';
const get = (target: string, headers: string[] = [], method = 'GET') =>
  [`${method} ${target} HTTP/1.1`, 'Host: 127.0.0.1', ...headers, 'Connection: close', '', ''].join(CRLF);
const post = (target: string, length: number, headers: string[] = []) =>
  get(target, [`Content-Length: ${length}`, 'Content-Type: application/json', ...headers], 'POST');

function expectEnvelope(res: RawResponse, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json\b/);
  expect(res.body, res.text).toMatchObject({ error: expect.any(String), code });
  expect(Object.keys(res.body).filter((k) => !['error', 'code', 'details'].includes(k))).toEqual([]);
}

const basic = (key: string) => Buffer.from(`${key}:`).toString('base64');

/** Every way a client may present a key, plus the errors in whose logging nginx would print it. */
async function trafficWithKeys(fd: FrontDoor, a: string, b: string): Promise<void> {
  const answers = [
    await raw(
      fd.port,
      get(`/ws?token=${a}`, [
        'Upgrade: websocket',
        'Connection: Upgrade',
        'Sec-WebSocket-Version: 13',
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      ]),
    ),
    await raw(fd.port, get(`/ws?cmd=1&TOKEN=${b}&token=${a}`)),
    await raw(fd.port, get('/api/venues', [`Authorization: Bearer ${a}`])),
    await raw(fd.port, get('/api/venues', [`Authorization: Basic ${basic(b)}`])),
    await raw(fd.port, get('/api/venues', [`Authorization: Bearer ${a}`, `Authorization: Bearer ${b}`])),
    await raw(fd.port, get(`/ws?token=${a}&pad=${'x'.repeat(9000)}`)),
    await raw(fd.port, get('/api/venues', [`Authorization: Bearer ${b}`, `X-Pad: ${'y'.repeat(9000)}`])),
    await raw(fd.port, get(`/api/venues?token=${a}`, [`Authorization: Bearer ${b}`], 'TRACE')),
    await raw(
      fd.port,
      post(`/ingest?api_key=${b}`, 12 * 1024 * 1024, [`Authorization: Bearer ${a}`]),
      Buffer.alloc(12 * 1024 * 1024, 0x20),
    ),
    await raw(fd.port, get(`/api/${a}`, [`Authorization: Bearer ${a}`, `Referer: http://example.com/?token=${b}`])),
  ];
  // Every one was answered (none hung), and at least the api answered the bearer request.
  expect(answers.map((r) => r.status)).toEqual([503, 503, 200, 401, 400, 414, 431, 405, 413, 404]);
}

/** Files whose bytes hold any of the needles (a file we cannot read fails the test). */
function filesHolding(files: string[], needles: string[]): string[] {
  const hits: string[] = [];
  for (const file of files) {
    const data = fs.readFileSync(file);
    for (const needle of needles) if (data.includes(needle)) hits.push(`${file}: ${needle.slice(0, 12)}…`);
  }
  return hits;
}

/**
 * The engines' logs under `.stack/`. The engines' data directories are skipped: Kafka's `*.log`
 * files are topic segments (event data, gigabytes after a benchmark), not logs, and the secrets scan
 * reads the segments of its own topics; ClickHouse's hold table parts, which its merges create and
 * delete while the walk goes on.
 */
function stackLogs(dir = repoPath('.stack')): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory() && entry.name === 'data' && /kafka|clickhouse/.test(path.relative(repoPath('.stack'), dir))) continue;
    if (entry.isDirectory()) out.push(...stackLogs(p));
    else if (entry.isFile() && entry.name.endsWith('.log')) out.push(p);
  }
  return out;
}

let api: RunningApi;
let a: TestOperator;
let b: TestOperator;
let fd: FrontDoor;
let apiDown: FrontDoor;
beforeAll(async () => {
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  a = await newOperator(api, 'pro');
  b = await newOperator(api, 'pro');
  const apiPort = Number(new URL(api.url).port);
  // The edge is not running in these tests: its port is closed, as is the api's for `apiDown`.
  fd = await startFrontDoor({ apiPort, edgePort: await freePort() });
  apiDown = await startFrontDoor({ apiPort: await freePort(), edgePort: await freePort() });
});
afterAll(async () => {
  await fd?.close();
  await apiDown?.close();
  await api?.close();
});

describe('the front door answers every error as the JSON envelope', () => {
  it('passes the api through, each operator seeing only its own venues', async () => {
    const venue = await newVenue(api, a.key, { name: 'Front door venue' });
    const own = await request(`${fd.url}/api/venues/${venue.id}`, { key: a.key });
    expect(own.status).toBe(200);
    expect(own.body.id).toBe(venue.id);
    const other = await request(`${fd.url}/api/venues/${venue.id}`, { key: b.key });
    expect([403, 404]).toContain(other.status);
    expect(other.body).toMatchObject({ code: expect.stringMatching(/^(FORBIDDEN|NOT_FOUND)$/) });
    const list = await request(`${fd.url}/api/venues`, { key: b.key });
    expect(JSON.stringify(list.body)).not.toContain(venue.id);
  });

  it('two Authorization headers: 400 VALIDATION_ERROR', async () => {
    expectEnvelope(
      await raw(fd.port, get('/api/venues', [`Authorization: Bearer ${a.key}`, `Authorization: Bearer ${b.key}`])),
      400,
      'VALIDATION_ERROR',
    );
  });

  it('a request line nginx cannot read: 400, or 505 for another HTTP version', async () => {
    expectEnvelope(await raw(fd.port, ['GET /api/venues HTTP/1.1', 'Connection: close', '', ''].join(CRLF)), 400, 'VALIDATION_ERROR');
    expectEnvelope(await raw(fd.port, 'G\x01T / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'), 400, 'VALIDATION_ERROR');
    expectEnvelope(await raw(fd.port, 'GET / HTTP/2.0\r\nHost: x\r\nConnection: close\r\n\r\n'), 505, 'VALIDATION_ERROR');
  });

  it('a URI over 8 KB: 414', async () => {
    expectEnvelope(await raw(fd.port, get(`/api/venues?q=${'a'.repeat(8200)}`)), 414, 'VALIDATION_ERROR');
  });

  it('headers over the limit: 431', async () => {
    expectEnvelope(await raw(fd.port, get('/api/venues', [`X-Pad: ${'a'.repeat(9000)}`])), 431, 'VALIDATION_ERROR');
    const many = Array.from({ length: 6 }, (_, i) => `X-Pad-${i}: ${'b'.repeat(7000)}`);
    expectEnvelope(await raw(fd.port, get('/api/venues', many)), 431, 'VALIDATION_ERROR');
  });

  it('TRACE and CONNECT: 405 METHOD_NOT_ALLOWED; a method nobody implements gets the api envelope', async () => {
    expectEnvelope(await raw(fd.port, get('/api/venues', [], 'TRACE')), 405, 'METHOD_NOT_ALLOWED');
    expectEnvelope(await raw(fd.port, get('/', [], 'CONNECT')), 405, 'METHOD_NOT_ALLOWED');
    expectEnvelope(await raw(fd.port, get('/api/venues', [], 'PROPFIND')), 501, 'METHOD_NOT_ALLOWED');
  });

  it("a body far over the limit: 413 PAYLOAD_TOO_LARGE with the api's limit, declared or chunked", async () => {
    const size = 12 * 1024 * 1024;
    const declared = await raw(fd.port, post('/ingest', size), Buffer.alloc(size, 0x20));
    expectEnvelope(declared, 413, 'PAYLOAD_TOO_LARGE');
    expect(declared.body.details).toEqual({ limitBytes: MAX_BODY_BYTES });
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const chunks = Buffer.concat(
      Array.from({ length: 12 }, () => Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')])),
    );
    const chunked = await raw(
      fd.port,
      get('/api/venues', ['Transfer-Encoding: chunked', 'Content-Type: application/json', `Authorization: Bearer ${a.key}`], 'POST'),
      Buffer.concat([chunks, Buffer.from('0\r\n\r\n')]),
    );
    expectEnvelope(chunked, 413, 'PAYLOAD_TOO_LARGE');
    expect(chunked.body.details).toEqual({ limitBytes: MAX_BODY_BYTES });
  });

  it("has exactly the api's body limit: a body at the limit reaches the api, one byte more is refused with the same answer", async () => {
    const body = (n: number) => Buffer.concat([Buffer.from('{}'), Buffer.alloc(n - 2, 0x20)]);
    const atLimit = await raw(fd.port, post('/api/venues', MAX_BODY_BYTES, [`Authorization: Bearer ${a.key}`]), body(MAX_BODY_BYTES));
    expectEnvelope(atLimit, 400, 'VALIDATION_ERROR'); // the api read it and found no name
    const over = await raw(fd.port, post('/api/venues', MAX_BODY_BYTES + 1, [`Authorization: Bearer ${a.key}`]), body(MAX_BODY_BYTES + 1));
    expectEnvelope(over, 413, 'PAYLOAD_TOO_LARGE');
    expect(over.body.details).toEqual({ limitBytes: MAX_BODY_BYTES });
  });

  it('an unknown Transfer-Encoding: 501', async () => {
    expectEnvelope(await raw(fd.port, get('/ingest', ['Transfer-Encoding: gzip'], 'POST')), 501, 'VALIDATION_ERROR');
  });

  it('the api down: 503 SERVICE_UNAVAILABLE with Retry-After, for every method', async () => {
    for (const head of [get('/api/venues', [`Authorization: Bearer ${a.key}`]), post('/ingest', 2), get('/health')]) {
      const res = await raw(apiDown.port, head, head.startsWith('POST') ? Buffer.from('{}') : undefined);
      expectEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }
  });

  it('the edge down: /ws gets the same 503', async () => {
    const res = await raw(fd.port, get(`/ws?token=${a.key}`, ['Upgrade: websocket', 'Connection: Upgrade']));
    expectEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('its own error pages are not addressable: 404 NOT_FOUND', async () => {
    expectEnvelope(await raw(fd.port, get('/.frontdoor/503')), 404, 'NOT_FOUND');
  });
});

describe('the front door in front of several api instances', () => {
  it('spreads the requests over them, and sends all to the others while one is down', async () => {
    const second = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
    const instances = [api, second];
    const door = await startFrontDoor({ apiPort: instances.map((i) => Number(new URL(i.url).port)), edgePort: await freePort() });
    const venue = await newVenue(api, a.key, { name: 'Balanced venue' });
    const served = [0, 0];
    const counters = instances.map((_, i) => () => served[i]!++);
    instances.forEach((instance, i) => instance.server.on('request', counters[i]!));
    try {
      for (let i = 0; i < 20; i++) expect((await request(`${door.url}/api/venues/${venue.id}`, { key: a.key })).status).toBe(200);
      expect(served[0]! + served[1]!).toBe(20);
      expect(Math.min(...served)).toBeGreaterThan(0);

      await second.close();
      const before = served[0]!;
      for (let i = 0; i < 10; i++) expect((await request(`${door.url}/api/venues/${venue.id}`, { key: a.key })).status).toBe(200);
      expect(served[0]! - before).toBe(10);
    } finally {
      api.server.off('request', counters[0]!);
      await door.close();
      await second.close().catch(() => undefined);
    }
  });
});

describe('the front door logs no key', () => {
  it('masks keys in the access log, prints no request line in the error log, and logs upstream failures', async () => {
    const door = await startFrontDoor({ apiPort: Number(new URL(api.url).port), edgePort: await freePort() });
    try {
      await trafficWithKeys(door, a.key, b.key);
      await door.stop();
      const access = fs.readFileSync(path.join(door.dir, 'access.log'), 'utf8');
      expect(access.trim().split('\n')).toHaveLength(10);
      expect(access).toContain('"GET /ws?token=*** HTTP/1.1" 503 ');
      expect(access).toContain('/ws?cmd=1&TOKEN=***&token=***');
      expect(access).toMatch(/upstream=127\.0\.0\.1:\d+ upstream_status=502/);
      expect(access).toContain('"GET [masked] HTTP/1.1" 404');
      expect(access).toContain('"TRACE /api/venues?token=*** HTTP/1.1" 405');
      expect(fs.readFileSync(path.join(door.dir, 'error.log'), 'utf8')).not.toContain('request:');
      const needles = [a.key, b.key, basic(a.key), basic(b.key)];
      expect(filesHolding(door.logFiles(), needles)).toEqual([]);
      expect(door.output()).toBe('');
    } finally {
      await door.close();
    }
  });

  it('creates its log files readable by their owner only', async () => {
    for (const file of LOG_FILES) {
      expect((fs.statSync(path.join(fd.dir, file)).mode & 0o777).toString(8), file).toBe('600');
    }
    // The shared stack's front door, prepared by the same code in global setup.
    for (const file of LOG_FILES) {
      expect((fs.statSync(repoPath('.stack', 'nginx', file)).mode & 0o077).toString(8), file).toBe('0');
    }
  });

  it('empties logs an older config wrote with keys in clear, once, when it replaces that config', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'venue-frontdoor-old-'));
    try {
      const upstreams = { port: 1, apiPort: 2, edgePort: 3 };
      fs.writeFileSync(path.join(dir, 'nginx.conf'), 'http { access_log access.log combined; }\n');
      fs.writeFileSync(path.join(dir, 'access.log'), `127.0.0.1 - - "GET /ws?token=${a.key} HTTP/1.1" 101\n`, { mode: 0o644 });
      fs.writeFileSync(path.join(dir, 'error.log'), `request: "GET /ws?token=${b.key} HTTP/1.1"\n`, { mode: 0o644 });
      expect(writeFrontDoor(dir, upstreams)).toEqual({ changed: true, emptied: ['access.log', 'error.log'] });
      expect(
        filesHolding(
          LOG_FILES.map((f) => path.join(dir, f)),
          [a.key, b.key],
        ),
      ).toEqual([]);
      for (const f of LOG_FILES) expect((fs.statSync(path.join(dir, f)).mode & 0o777).toString(8), f).toBe('600');
      // Written by the current config: kept.
      fs.writeFileSync(path.join(dir, 'access.log'), '127.0.0.1 "GET /ws?token=*** HTTP/1.1" 101\n');
      expect(writeFrontDoor(dir, upstreams)).toEqual({ changed: false, emptied: [] });
      expect(fs.readFileSync(path.join(dir, 'access.log'), 'utf8')).toContain('token=***');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the compose front door (deploy/nginx.conf) masks the same way and answers JSON', async () => {
    const door = await startDeployFrontDoor({ apiPort: Number(new URL(api.url).port), edgePort: await freePort() });
    try {
      await trafficWithKeys(door, a.key, b.key);
      expectEnvelope(await raw(door.port, get('/api/venues', [], 'TRACE')), 405, 'METHOD_NOT_ALLOWED');
      await door.stop();
      expect(door.output()).toContain('"GET /ws?token=*** HTTP/1.1" 503 ');
      expect(door.output()).not.toContain('request:');
      for (const needle of [a.key, b.key, basic(a.key), basic(b.key)]) expect(door.output()).not.toContain(needle);
      expect(filesHolding(door.logFiles(), [a.key, b.key])).toEqual([]);
    } finally {
      await door.close();
    }
  });

  it('no log under .stack/ holds a key of this run', () => {
    const logs = stackLogs();
    expect(logs.length).toBeGreaterThan(0);
    expect(filesHolding(logs, [a.key, b.key, basic(a.key), basic(b.key)])).toEqual([]);
  });
});
