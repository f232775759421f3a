import net from 'node:net';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

/**
 * The fuzz runs are reproducible: every file runs with this seed unless FUZZ_SEED is set (fast-check
 * prints the seed and the failing case's path; rerun with that seed to replay it).
 */
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 20_261_123);

/** What the fuzzing operator must never be answered with: a second operator's data. */
export interface Victim {
  op: TestOperator;
  venueName: string;
  venueId: string;
  zoneId: string;
  integrationId: string;
  alarmId: string;
}

/** A second operator with a venue, a zone, an integration and an alarm (the alarm written as the rule consumer would). */
export async function newVictim(api: RunningApi): Promise<Victim> {
  const op = await newOperator(api, 'pro');
  const venueName = `Victim-${randomBytes(6).toString('hex')}`;
  const venue = await newVenue(api, op.key, { name: venueName });
  const zone = await request(`${api.url}/api/venues/${venue.id}/zones`, {
    key: op.key,
    json: { slug: 'vz', name: `${venueName} hall`, type: 'area', capacity: 10 },
  });
  if (zone.status !== 201) throw new Error(`victim zone: ${zone.status} ${JSON.stringify(zone.body)}`);
  const integration = await request(`${api.url}/api/venues/${venue.id}/integrations`, {
    key: op.key,
    json: { connector_type: 'density', config: { api_token: `victim-token-${randomBytes(8).toString('hex')}` } },
  });
  if (integration.status !== 201) throw new Error(`victim integration: ${integration.status} ${JSON.stringify(integration.body)}`);
  const { rows } = await api.services.db.query<{ id: string }>(
    `INSERT INTO alarms (operator_id, venue_id, zone_id, type, severity, message) VALUES ($1, $2, $3, 'zone_occupancy_high', 'MAJOR', $4) RETURNING id`,
    [op.id, venue.id, zone.body.id, `${venueName} is full`],
  );
  return { op, venueName, venueId: venue.id, zoneId: zone.body.id, integrationId: integration.body.id, alarmId: rows[0]!.id };
}

/**
 * What in an answer belongs to the victim and was not in the request: its venue name and key never
 * may appear; its ids only when the caller sent them (an error may name what it was asked about).
 */
export function leaksOf(victim: Victim, sent: string, answer: string): string[] {
  const s = sent.toLowerCase();
  const a = answer.toLowerCase();
  const found: string[] = [];
  if (a.includes(victim.venueName.toLowerCase())) found.push('venue name');
  if (answer.includes(victim.op.key)) found.push('api key');
  for (const [what, id] of Object.entries({
    venueId: victim.venueId,
    zoneId: victim.zoneId,
    integrationId: victim.integrationId,
    alarmId: victim.alarmId,
    operatorId: victim.op.id,
  })) {
    if (a.includes(id.toLowerCase()) && !s.includes(id.toLowerCase()) && !s.includes(encodeURIComponent(id).toLowerCase()))
      found.push(what);
  }
  return found;
}

// ---- junk ---------------------------------------------------------------------------------------

export const INJECTIONS = [
  "' OR 1=1--",
  "'; DROP TABLE venues;--",
  '" OR ""="',
  "1' UNION SELECT name FROM system.tables --",
  "x' FORMAT JSONEachRow --",
  '$(reboot)',
  '`id`',
  '{{7*7}}',
  '${jndi:ldap://x/a}',
  '<script>alert(1)</script>',
  '../../../../etc/passwd',
  '..%2f..%2fetc%2fpasswd',
  '%00',
  '\\u0000',
  '__proto__',
  'constructor',
  '{"$gt":""}',
  'null',
  'undefined',
  'NaN',
  '-Infinity',
];

export const UNICODE_EDGES = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff',
  'x\udc00y',
  '\ufeff',
  '\u202egnp.exe',
  '\u200b',
  '\uffff',
  '🙂',
  '👩‍👩‍👧‍👦',
  'Z͑ͫ̓ͪ̂ͫ̽͏̴̙̤̞͉͚̯̞̠͍',
  'ｆｕｌｌ',
  '\t\n\r',
  '\u0085\u2028\u2029',
  'İıſ',
];

export const NUMBER_EDGES = [
  0,
  -0,
  -1,
  1,
  1.5,
  2 ** 31 - 1,
  2 ** 31,
  -(2 ** 31) - 1,
  2 ** 53,
  -(2 ** 53),
  2 ** 63,
  1e308,
  -1e308,
  5e-324,
  1e-7,
];

export const junkString: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 2, arbitrary: fc.constantFrom(...INJECTIONS, ...UNICODE_EDGES) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.constantFrom('x'.repeat(300), 'é'.repeat(5_000), 'a'.repeat(100_000)) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '2024-13-45T99:99:99Z',
      '1970-01-01T00:00:00Z',
      '9999-12-31T23:59:59.999Z',
      '-000001-01-01T00:00:00Z',
      '00000000-0000-0000-0000-000000000000',
      'not-a-uuid',
    ),
  },
);

export const junkNumber: fc.Arbitrary<number> = fc.oneof(fc.constantFrom(...NUMBER_EDGES), fc.integer(), fc.double({ noNaN: true }));

/** Any JSON-ish value, nested a few levels. */
export const junkValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    junkString,
    junkNumber,
    fc.constantFrom(null, true, false),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(junkString, fc.constantFrom('__proto__', 'constructor', 'toString')), tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** A JSON text nested far deeper than any parser likes. */
export const deepJson = fc.constantFrom(
  '['.repeat(10_000) + ']'.repeat(10_000),
  '{"a":'.repeat(5_000) + '1' + '}'.repeat(5_000),
  `{"events":${'['.repeat(3_000)}${']'.repeat(3_000)}}`,
);

/** Raw bodies that are not JSON or not UTF-8. */
export const rawJunkBody: fc.Arbitrary<Buffer> = fc.oneof(
  fc
    .constantFrom('{', '{"a":', 'nan', '[1,,2]', '{"a":1}{"b":2}', '\u0000', 'null', '"x"', '1e999', '{"__proto__":{"admin":true}}')
    .map((s) => Buffer.from(s)),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
  fc.constantFrom(
    Buffer.from([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00]),
    Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]),
    Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]),
  ),
  deepJson.map((s) => Buffer.from(s)),
);

export const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/json; charset=nope',
  'APPLICATION/JSON',
  'application/vnd.api+json',
  'text/plain',
  'text/html',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/xml',
  '*/*',
  ';;;',
  'application/json, text/html',
];

export const CONTENT_ENCODINGS = ['gzip', 'deflate', 'br', 'identity', 'x-unknown', 'gzip, gzip', 'compress'];

/** Percent-encodes a string for a URL; lone surrogates become CESU-8 bytes, which are not valid UTF-8. */
export function encodeLoosely(value: string): string {
  let out = '';
  for (const ch of value) {
    const code = ch.codePointAt(0)!;
    if (code >= 0xd800 && code <= 0xdfff) {
      out += `%${(0xe0 | (code >> 12)).toString(16).toUpperCase()}%${(0x80 | ((code >> 6) & 0x3f)).toString(16).toUpperCase()}%${(0x80 | (code & 0x3f)).toString(16).toUpperCase()}`;
    } else {
      out += encodeURIComponent(ch);
    }
  }
  return out;
}

/** Path segments and query values sent without encoding: malformed escapes and the like. */
export const RAW_URL_PIECES = ['%', '%zz', '%E0%A4%A', '%00', '%FF', '%C0%AF', '%2e%2e', '..', '.', '%2F', '%252F', '+', '%20'];

/** A header value the HTTP/1.1 framing can carry (no CR, LF or NUL), latin1 bytes included. */
export const junkHeaderValue: fc.Arbitrary<string> = fc
  .oneof(
    junkString.map((s) => Buffer.from(s, 'utf8').toString('latin1')),
    fc.constantFrom('', ' ', '\t', 'x'.repeat(6_000), 'ÿ', 'Bearer', 'Bearer ', 'Basic Zm9vOmJhcg=='),
  )
  .map((s) => s.replace(/[\r\n\0]/g, ''));

// ---- a raw HTTP/1.1 client --------------------------------------------------------------------

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  text: string;
  ms: number;
}

/**
 * One request on its own connection, written byte for byte (duplicate and odd headers, any body),
 * so nothing in a client library tidies up the junk. Rejects when no complete answer arrives in time.
 */
export function rawRequest(
  url: string,
  req: { method: string; path: string; headers: Array<[string, string]>; body?: Buffer },
  timeoutMs = 10_000,
): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      try {
        resolve({ ...parseResponse(Buffer.concat(chunks)), ms: Date.now() - started });
      } catch (err) {
        reject(err);
      }
    });
    const lines = [`${req.method} ${req.path} HTTP/1.1`, `Host: ${hostname}:${port}`, 'Connection: close'];
    for (const [k, v] of req.headers) lines.push(`${k}: ${v}`);
    if (req.body) lines.push(`Content-Length: ${req.body.length}`);
    socket.write(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), req.body ?? Buffer.alloc(0)]));
  });
}

function parseResponse(raw: Buffer): Omit<RawAnswer, 'ms'> {
  let rest = raw;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) throw new Error(`incomplete answer: ${JSON.stringify(rest.toString('latin1').slice(0, 200))}`);
    const head = rest.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(head[0]!.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    let body = rest.subarray(end + 4);
    if (status >= 100 && status < 200) {
      rest = body;
      continue;
    }
    if (headers['transfer-encoding']?.includes('chunked')) body = dechunk(body);
    else if (headers['content-length'] !== undefined) body = body.subarray(0, Number(headers['content-length']));
    return { status, headers, text: body.toString('utf8') };
  }
}

function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = body.indexOf('\r\n', at);
    if (lineEnd < 0) throw new Error('truncated chunked answer');
    const size = parseInt(body.subarray(at, lineEnd).toString('latin1'), 16);
    if (size === 0) return Buffer.concat(parts);
    parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

/** The spec's error envelope: `{ error, code, details? }` and nothing else. */
export function isEnvelope(text: string): boolean {
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    return (
      typeof body === 'object' &&
      body !== null &&
      typeof body.error === 'string' &&
      typeof body.code === 'string' &&
      Object.keys(body).every((k) => ['error', 'code', 'details'].includes(k))
    );
  } catch {
    return false;
  }
}

/** Runs a property with the fixed seed; a failure names the seed, the path to replay and the first lines of the error, not the (huge) counterexample. */
export async function checkProperty<T>(property: fc.IAsyncPropertyWithHooks<T> | fc.IAsyncProperty<T>, numRuns: number): Promise<void> {
  const out = await fc.check(property, { seed: FUZZ_SEED, numRuns, endOnFailure: true });
  if (out.failed) {
    const err = out.errorInstance instanceof Error ? out.errorInstance.message : String(out.errorInstance);
    throw new Error(`property failed (FUZZ_SEED=${out.seed}, path ${out.counterexamplePath}): ${err.slice(0, 1_500)}`);
  }
}
