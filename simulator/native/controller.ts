import { execFileSync } from 'node:child_process';
import { randomBytes, timingSafeEqual, X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { UnifiRecord } from './types.js';

/**
 * A fake UniFi Network controller on 127.0.0.1 (https, a self-signed certificate the integration
 * pins), so the pipeline's UniFi poller runs against something that speaks the controller's API:
 *
 * - `POST /api/login` `{username, password}` → `{meta:{rc:"ok"}}` and a `unifises` session cookie;
 *   wrong credentials → 400 `api.err.Invalid` (what a controller answers).
 * - `GET /api/s/{site}/stat/sta` with the cookie → `{meta:{rc:"ok"}, data:[client…]}`; without →
 *   401 `api.err.LoginRequired`; a site the account may not see → 400 `api.err.NoSiteContext`.
 * - `POST /api/logout`.
 *
 * `stat/sta` lists the clients the simulator handed over that no poll has been served yet (oldest
 * first, up to `maxPerPoll`, which is what carries a backfill's history: the poller keeps only records
 * newer than its cursor, so history is fetched once), plus each client's latest record of the last
 * `recentMs` (a real controller lists the clients connected now; the poller's cursor skips those it
 * already has).
 */

export interface CertificateFiles {
  keyPath: string;
  certPath: string;
  key: string;
  cert: string;
  /** Lower-case hex SHA-256 of the DER certificate, no colons (the integration's certificate_sha256). */
  sha256: string;
}

/**
 * The controller's certificate in `dir` (made once with openssl, reused on later runs so the pin
 * stays the same): EC P-256, ten years, CN 127.0.0.1.
 */
export function ensureCertificate(dir: string): CertificateFiles {
  const keyPath = join(dir, 'unifi-controller.key');
  const certPath = join(dir, 'unifi-controller.crt');
  if (!existsSync(keyPath) || !existsSync(certPath)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
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
        '-days',
        '3650',
        '-subj',
        '/CN=127.0.0.1',
        '-keyout',
        keyPath,
        '-out',
        certPath,
      ],
      { stdio: 'ignore' },
    );
    chmodSync(keyPath, 0o600);
  }
  const key = readFileSync(keyPath, 'utf8');
  const cert = readFileSync(certPath, 'utf8');
  return { keyPath, certPath, key, cert, sha256: certificateSha256(cert) };
}

export const certificateSha256 = (pem: string): string => new X509Certificate(pem).fingerprint256.replace(/:/g, '').toLowerCase();

export interface ControllerStats {
  logins: number;
  refusedLogins: number;
  polls: number;
  /** Records served for the first time (the ones the poller can publish). */
  served: number;
}

interface Account {
  password: string;
  site: string;
}

interface SiteStore {
  /** Handed over, not yet served, in last_seen order. */
  pending: UnifiRecord[];
  /** Served, kept while recent: the latest per client. */
  recent: Map<string, UnifiRecord>;
}

export interface ControllerOptions {
  certDir: string;
  log: Logger;
  port?: number;
  maxPerPoll?: number;
  recentMs?: number;
  now?: () => number;
}

export class FakeUnifiController {
  readonly stats: ControllerStats = { logins: 0, refusedLogins: 0, polls: 0, served: 0 };
  private readonly accounts = new Map<string, Account>();
  private readonly sessions = new Map<string, string>();
  private readonly sites = new Map<string, SiteStore>();
  private readonly listeners = new Set<() => void>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly certificateSha256: string,
    private readonly opts: ControllerOptions,
  ) {}

  static async start(opts: ControllerOptions): Promise<FakeUnifiController> {
    const cert = ensureCertificate(opts.certDir);
    let controller: FakeUnifiController | undefined;
    const server = createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
      controller!.handle(req, res).catch((err: Error) => {
        opts.log.warn({ err }, 'fake UniFi controller: request failed');
        if (!res.headersSent) res.writeHead(500).end();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    controller = new FakeUnifiController(server, `https://127.0.0.1:${port}`, cert.sha256, opts);
    return controller;
  }

  /** A read-only account that sees one site. */
  addAccount(username: string, password: string, site: string): void {
    this.accounts.set(username, { password, site });
    this.store(site);
  }

  /** Client records seen by the site's APs (time-ordered within a stream), served from the next poll on. */
  add(site: string, records: UnifiRecord[]): void {
    const s = this.store(site);
    for (const r of records) s.pending.push(r);
    s.pending.sort((a, b) => a.last_seen - b.last_seen);
  }

  /** Records handed over that no poll has fetched yet. */
  pending(site?: string): number {
    let n = 0;
    for (const [name, s] of this.sites) if (site === undefined || name === site) n += s.pending.length;
    return n;
  }

  /** Resolves true once every handed-over record has been served, false after `timeoutMs` or a stop. */
  async waitServed(timeoutMs: number, stopping: () => boolean = () => false): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    while (this.pending() > 0) {
      if (Date.now() >= until || stopping()) return false;
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, 250);
        this.listeners.add(done);
        function done() {
          clearTimeout(t);
          resolve();
        }
      });
    }
    return true;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private store(site: string): SiteStore {
    let s = this.sites.get(site);
    if (!s) this.sites.set(site, (s = { pending: [], recent: new Map() }));
    return s;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'https://controller').pathname;
    if (req.method === 'POST' && path === '/api/login') return this.login(req, res);
    if (req.method === 'POST' && path === '/api/logout') {
      const token = sessionOf(req);
      if (token) this.sessions.delete(token);
      return send(res, 200, { meta: { rc: 'ok' }, data: [] });
    }
    const m = /^\/api\/s\/([^/]+)\/stat\/sta\/?$/.exec(path);
    if (req.method === 'GET' && m) {
      const token = sessionOf(req);
      const user = token ? this.sessions.get(token) : undefined;
      if (!user) return send(res, 401, { meta: { rc: 'error', msg: 'api.err.LoginRequired' }, data: [] });
      const site = decodeURIComponent(m[1]!);
      if (this.accounts.get(user)?.site !== site) return send(res, 400, { meta: { rc: 'error', msg: 'api.err.NoSiteContext' }, data: [] });
      return send(res, 200, { meta: { rc: 'ok' }, data: this.serve(site) });
    }
    return send(res, 404, { meta: { rc: 'error', msg: 'api.err.NotFound' }, data: [] });
  }

  private async login(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: { username?: unknown; password?: unknown } = {};
    try {
      body = JSON.parse(await readBody(req)) as typeof body;
    } catch {
      /* answered as invalid below */
    }
    const account = typeof body.username === 'string' ? this.accounts.get(body.username) : undefined;
    if (!account || typeof body.password !== 'string' || !sameText(body.password, account.password)) {
      this.stats.refusedLogins++;
      return send(res, 400, { meta: { rc: 'error', msg: 'api.err.Invalid' }, data: [] });
    }
    const token = randomBytes(24).toString('hex');
    this.sessions.set(token, body.username as string);
    this.stats.logins++;
    res.setHeader('set-cookie', `unifises=${token}; Path=/; Secure; HttpOnly; SameSite=Strict`);
    return send(res, 200, { meta: { rc: 'ok' }, data: [] });
  }

  /** What one poll sees: the oldest unserved records (up to the cap, never splitting a second) and the recent clients. */
  private serve(site: string): UnifiRecord[] {
    this.stats.polls++;
    const s = this.store(site);
    const now = (this.opts.now ?? Date.now)();
    const max = this.opts.maxPerPoll ?? 20_000;
    let n = Math.min(max, s.pending.length);
    while (n < s.pending.length && n > 0 && s.pending[n]!.last_seen === s.pending[n - 1]!.last_seen) n--;
    if (n === 0) n = Math.min(s.pending.length, max);
    const fresh = s.pending.splice(0, n);
    this.stats.served += fresh.length;
    for (const r of fresh) {
      const had = s.recent.get(r.mac);
      if (!had || had.last_seen <= r.last_seen) s.recent.set(r.mac, r);
    }
    const horizon = Math.floor((now - (this.opts.recentMs ?? 5 * 60_000)) / 1000);
    for (const [mac, r] of s.recent) if (r.last_seen < horizon) s.recent.delete(mac);
    const listed = new Set(fresh);
    const out = [...fresh, ...[...s.recent.values()].filter((r) => !listed.has(r))].sort((a, b) => a.last_seen - b.last_seen);
    for (const l of [...this.listeners]) {
      this.listeners.delete(l);
      l();
    }
    return out;
  }
}

function sessionOf(req: IncomingMessage): string | undefined {
  const cookie = req.headers.cookie ?? '';
  return /(?:^|;\s*)unifises=([0-9a-f]+)/.exec(cookie)?.[1];
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 64 * 1024) throw new Error('login body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json;charset=UTF-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
