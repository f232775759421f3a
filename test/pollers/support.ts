import { execFileSync } from 'node:child_process';
import { randomUUID, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { expect } from 'vitest';
import { Kafka, logLevel, type Consumer } from 'kafkajs';
import { chRows, chsql } from '../../clickhouse/client.js';
import { derivedTopicNames } from '../../lib/topology.js';
import { decodeIngestReport, type IngestReport } from '../../lib/events/derived.js';
import { createLogger, type Logger } from '../../lib/logger.js';
import { keyringFromConfig } from '../../lib/secret-box.js';
import { Pseudonyms } from '../../domain/ingest/pseudonyms.js';
import { Throughput } from '../../domain/system/throughput.js';
import { runEventsSink, type RunningEventsSink } from '../../pipeline/sink/events-sink.js';
import { startPollers, type PollerRunnerOptions, type RunningPollers } from '../../pipeline/pollers/runner.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A self-signed EC certificate for 127.0.0.1, made by openssl in a temp dir, and its SHA-256 fingerprint (hex). */
export function selfSignedCert(): { key: Buffer; cert: Buffer; sha256: string; colons: string } {
  const dir = mkdtempSync(join(tmpdir(), 'poller-cert-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '2',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    const key = readFileSync(join(dir, 'key.pem'));
    const cert = readFileSync(join(dir, 'cert.pem'));
    const colons = new X509Certificate(cert).fingerprint256;
    return { key, cert, colons, sha256: colons.replace(/:/g, '').toLowerCase() };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

/** An HTTPS server on 127.0.0.1 the test controls; `hang` makes it take requests and never answer. */
export class FakeServer {
  hang = false;
  requests: Array<{ method: string; path: string; headers: IncomingMessage['headers']; body: string; at: number }> = [];
  private readonly sockets = new Set<Socket>();
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(tls: { key: Buffer; cert: Buffer }, handler: Handler): Promise<FakeServer> {
    let self: FakeServer | undefined;
    const server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        self!.requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, at: Date.now() });
        if (self!.hang) return; // never answered; the socket is destroyed on close
        handler(req, body, res);
      });
    });
    server.on('secureConnection', (s: Socket) => {
      self?.sockets.add(s);
      s.on('close', () => self?.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new FakeServer(server, `https://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return self;
  }

  count(pathPrefix: string): number {
    return this.requests.filter((r) => r.path.startsWith(pathPrefix)).length;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string | string[]> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

export interface FakeUnifiClient {
  mac: string;
  last_seen: number;
  ap_mac?: string;
  essid?: string;
  rssi?: number;
  signal?: number;
  first_seen?: number;
  is_guest?: boolean;
  hostname?: string;
}

/** A UniFi controller: classic (/api/login, cookie unifises) or UniFi OS (/api/auth/login, cookie TOKEN, /proxy/network). */
export class FakeUnifi {
  clients: FakeUnifiClient[] = [];
  /** Answer every request with this status (e.g. 500) while set. */
  failWith?: number;
  readonly sessions = new Set<string>();
  logins = 0;
  server!: FakeServer;

  constructor(
    readonly creds: { username: string; password: string },
    readonly opts: { unifiOs?: boolean; site?: string } = {},
  ) {}

  static async start(
    tls: { key: Buffer; cert: Buffer },
    creds: { username: string; password: string },
    opts: { unifiOs?: boolean; site?: string } = {},
  ): Promise<FakeUnifi> {
    const u = new FakeUnifi(creds, opts);
    u.server = await FakeServer.start(tls, (req, body, res) => u.handle(req, body, res));
    return u;
  }

  get url(): string {
    return this.server.url;
  }

  count(pathPrefix: string): number {
    return this.server.count(pathPrefix);
  }

  private handle(req: IncomingMessage, body: string, res: ServerResponse): void {
    if (this.failWith) return json(res, this.failWith, { meta: { rc: 'error', msg: 'server error' } });
    const os = this.opts.unifiOs;
    const loginPath = os ? '/api/auth/login' : '/api/login';
    const cookieName = os ? 'TOKEN' : 'unifises';
    if (req.method === 'POST' && req.url === loginPath) {
      const creds = JSON.parse(body || '{}');
      if (creds.username !== this.creds.username || creds.password !== this.creds.password) {
        return json(res, os ? 401 : 400, { meta: { rc: 'error', msg: 'api.err.Invalid' }, data: [] });
      }
      this.logins++;
      const token = randomUUID();
      this.sessions.add(token);
      return json(
        res,
        200,
        { meta: { rc: 'ok' }, data: [] },
        { 'set-cookie': [`${cookieName}=${token}; Path=/; Secure; HttpOnly`, 'csrf_token=abc; Path=/'] },
      );
    }
    const sta = `${os ? '/proxy/network' : ''}/api/s/${this.opts.site ?? 'default'}/stat/sta`;
    if (req.method === 'GET' && req.url === sta) {
      const cookie = new RegExp(`${cookieName}=([^;]+)`).exec(req.headers.cookie ?? '')?.[1];
      if (!cookie || !this.sessions.has(cookie)) return json(res, 401, { meta: { rc: 'error', msg: 'api.err.LoginRequired' }, data: [] });
      return json(res, 200, { meta: { rc: 'ok' }, data: this.clients });
    }
    if (req.method === 'GET' && /\/api\/s\/[^/]+\/stat\/sta$/.test(req.url ?? ''))
      return json(res, 400, { meta: { rc: 'error', msg: 'api.err.NoSiteContext' }, data: [] });
    json(res, 404, { error: 'not found' });
  }

  close(): Promise<void> {
    return this.server.close();
  }
}

/** Captures a pino logger's lines, to check what reached the logs. */
export function capturedLogger(level = 'debug'): { log: Logger; text: () => string } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  return { log: createLogger('pollers-test', level, stream), text: () => lines.join('') };
}

/** An api (to create tenants and integrations), the events sink (to store in ClickHouse) and a reports tap, on a topic prefix of their own. */
export class PollerEnv {
  reports: IngestReport[] = [];
  private readonly created: string[] = [];
  private constructor(
    readonly api: RunningApi,
    readonly sink: RunningEventsSink | undefined,
    private readonly reportsConsumer: Consumer,
    readonly op: TestOperator,
  ) {}

  /** `sink: false` when a pipeline process of the test runs the events sink on this prefix. */
  static async start(name: string, opts: { sink?: boolean } = {}): Promise<PollerEnv> {
    const prefix = `${testConfig().KAFKA_TOPIC_PREFIX}.${name}${randomUUID().slice(0, 6)}`;
    const cfg = testConfig({ KAFKA_TOPIC_PREFIX: prefix });
    const api = await startApi(cfg);
    const { kafka, db, ch, producer, topics, log } = api.services;
    const sink =
      opts.sink === false
        ? undefined
        : await runEventsSink(kafka, {
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
    const k = new Kafka({ brokers: cfg.KAFKA_BROKERS, clientId: 'pollers-test-reports', logLevel: logLevel.NOTHING });
    const consumer = k.consumer({ groupId: `pollers-test-${randomUUID()}`, maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topic: derivedTopicNames(prefix).ingestReports, fromBeginning: true });
    const op = await newOperator(api, 'pro');
    const env = new PollerEnv(api, sink, consumer, op);
    await consumer.run({
      eachMessage: async ({ message }) => {
        try {
          env.reports.push(decodeIngestReport(message.value));
        } catch {
          // not ours
        }
      },
    });
    return env;
  }

  get cfg() {
    return this.api.services.cfg;
  }

  /** A venue of the operator with one integration; returns both ids. */
  async integration(connectorType: string, config: Record<string, unknown>): Promise<{ venueId: string; integrationId: string }> {
    const venueId = (await newVenue(this.api, this.op.key)).id as string;
    const res = await request(`${this.api.url}/api/venues/${venueId}/integrations`, {
      key: this.op.key,
      json: { connector_type: connectorType, config },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    this.created.push(res.body.id);
    return { venueId, integrationId: res.body.id as string };
  }

  /** A runner over this env's engines; options tuned for tests (short intervals, leases and timeouts). */
  runner(log: Logger, opts: Partial<PollerRunnerOptions> = {}): RunningPollers {
    const { services } = this.api;
    return startPollers({
      db: services.db,
      keyring: keyringFromConfig(services.cfg),
      ingest: {
        db: services.db,
        publisher: services.publisher,
        topic: services.topics.events,
        reportsTopic: derivedTopicNames(services.cfg.KAFKA_TOPIC_PREFIX).ingestReports,
        pseudonyms: new Pseudonyms(services.cfg.PSEUDONYM_KEY),
        throughput: new Throughput(services.redis),
        log,
      },
      log,
      listIntervalMs: 300,
      renewMs: 200,
      leaseMs: 3000,
      requestTimeoutMs: 1500,
      backoffBaseMs: 200,
      maxBackoffMs: 1000,
      stopGraceMs: 1000,
      intervals: { unifi: 300, aruba: 300, verkada: 300 },
      ...opts,
    });
  }

  /** The venue's stored raw events. */
  async stored(venueId: string): Promise<
    Array<{
      event_id: string;
      event_type: string;
      ts: string;
      device: string;
      payload: string;
      metric_names: string[];
      metric_values: number[];
    }>
  > {
    return chRows(
      this.api.services.ch,
      chsql`SELECT toString(event_id) AS event_id, event_type, toString(ts) AS ts, device, payload, metric_names, metric_values FROM events WHERE venue_id = ${venueId} ORDER BY ts, event_id`,
    );
  }

  /** Waits until the venue holds `n` stored events, then a little longer to catch an extra one. */
  async waitStored(venueId: string, n: number, timeoutMs = 15_000): Promise<Awaited<ReturnType<PollerEnv['stored']>>> {
    const deadline = Date.now() + timeoutMs;
    let rows = await this.stored(venueId);
    while (rows.length < n && Date.now() < deadline) {
      await sleep(150);
      rows = await this.stored(venueId);
    }
    await sleep(600);
    rows = await this.stored(venueId);
    expect(rows.length, `stored events of venue ${venueId}`).toBe(n);
    return rows;
  }

  async close(): Promise<void> {
    // Later suites (and pipeline processes they start) must not poll this file's fake controllers.
    await this.api.services.db.query(`UPDATE integrations SET is_active = false WHERE id = ANY($1::uuid[])`, [this.created]);
    await this.reportsConsumer.disconnect();
    await this.sink?.stop();
    await this.api.close();
  }
}

export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}
