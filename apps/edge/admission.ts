import type uWS from 'uWebSockets.js';
import type { Redis } from 'ioredis';
import type { Config } from '../../lib/config.js';
import type { Logger } from '../../lib/logger.js';
import { AppError } from '../../lib/errors.js';
import { resolveClientAddress, trustedPeers } from '../../lib/client-address.js';
import type { Db } from '../../postgres/client.js';
import { authenticate, stillLiveKeys } from '../../domain/tenants/operators.js';
import { hashApiKey } from '../../domain/tenants/api-keys.js';
import { ConnectionLeases } from '../../domain/limits/connections.js';
import { RateLimiter, rateLimited } from '../../domain/limits/rate-limit.js';
import { CLOSE, closeReason } from './protocol.js';
import { CHECK_TIMEOUT_MS, enqueue, newConn, type Conn } from './connection.js';
import type { EdgeCounters, EdgeSocket } from './subscriptions.js';
import { withTimeout } from '../../lib/timers.js';

/** Operators whose id and key hash strings are remembered, so their connections share one copy of each. */
const IDENTITY_CACHE = 8192;

/** The TCP peer as text; uWS writes an IPv4 peer of a dual-stack socket in full IPv6 form. */
function peerAddress(res: uWS.HttpResponse): string {
  const text = Buffer.from(res.getRemoteAddressAsText()).toString('latin1');
  const mapped = /^(?:0{1,4}:){5}ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(text);
  if (!mapped) return text;
  const [hi, lo] = [parseInt(mapped[1]!, 16), parseInt(mapped[2]!, 16)];
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/**
 * Who may open a /ws connection: the API key (checked as the api checks it, and re-checked while
 * the connection lives), the operator's connection leases, the client address's wrong-key budget.
 */
export class Admission {
  readonly leases: ConnectionLeases;
  /** The api's budget of wrong keys per client address (same Redis keys): guesses over REST and /ws share it. */
  private readonly failures: RateLimiter | undefined;
  private readonly isTrusted: (addr: string) => boolean;
  /** Recent operators' id and key hash (insertion order, the oldest dropped past IDENTITY_CACHE): one copy of each string per operator, not per connection. */
  private readonly identities = new Map<string, { operatorId: string; keyHash: string }>();
  /** Lease releases under way, awaited at shutdown. */
  private readonly releases = new Set<Promise<void>>();
  /** Admissions under way: each ends by welcoming, refusing or releasing its connection. */
  private readonly admitting = new Set<Promise<void>>();

  constructor(
    cfg: Config,
    private readonly log: Logger,
    private readonly db: Db,
    redis: Redis,
    private readonly counters: EdgeCounters,
  ) {
    this.leases = new ConnectionLeases(redis, { limit: cfg.WS_MAX_CONNECTIONS_PER_OPERATOR, ttlMs: cfg.WS_LEASE_TTL_MS, log });
    this.failures = cfg.RATE_LIMITS_ENABLED
      ? new RateLimiter(redis, { limits: { unauthenticated: cfg.UNAUTHENTICATED_RATE_LIMIT } })
      : undefined;
    this.isTrusted = trustedPeers(cfg.TRUSTED_PROXIES);
  }

  /**
   * The /ws upgrade: 503 while shutting down, otherwise accepted at once, inside uWS's own request
   * handler. The key is checked once the socket is open (`opened`): the async upgrade
   * (`res.cork(() => res.upgrade())` after an await) is unsafe in uWebSockets.js 20.30, whose
   * cork() can read the freed HTTP state of the upgraded socket and close it right after its
   * `connected` (uWebSockets PR #1929; docs/websocket.md).
   */
  upgrade(res: uWS.HttpResponse, req: uWS.HttpRequest, context: uWS.us_socket_context_t, accepting: () => boolean): void {
    if (!accepting()) {
      res
        .writeStatus('503 Service Unavailable')
        .writeHeader('Content-Type', 'application/json')
        .writeHeader('Retry-After', '1')
        .end(JSON.stringify({ error: 'this edge is shutting down; reconnect', code: 'SERVICE_UNAVAILABLE' }));
      return;
    }
    const client = resolveClientAddress(this.isTrusted, peerAddress(res), req.getHeader('x-forwarded-for'));
    res.upgrade(
      newConn(req.getQuery('token') ?? '', client),
      req.getHeader('sec-websocket-key'),
      req.getHeader('sec-websocket-protocol'),
      req.getHeader('sec-websocket-extensions'),
      context,
    );
  }

  /**
   * A just-opened connection: checks its key and takes its lease, then refuses it (one error
   * message, then a close code) or hands it to `welcome`. Its messages wait in its queue meanwhile.
   */
  opened(conn: Conn, ws: EdgeSocket, accepting: () => boolean, welcome: () => void): void {
    const { token, client } = conn;
    conn.token = '';
    conn.client = '';
    const admitted = this.admit(conn, token, client)
      .catch((err: Error) => {
        this.log.error({ err }, 'connection admission failed');
        conn.refusal = {
          close: CLOSE.SERVICE_UNAVAILABLE,
          errorCode: 'SERVICE_UNAVAILABLE',
          message: 'cannot admit the connection right now; retry',
        };
      })
      .then(() => {
        if (!conn.open) return this.release(conn);
        if (!accepting() && !conn.refusal)
          conn.refusal = { close: CLOSE.GOING_AWAY, errorCode: 'SERVICE_UNAVAILABLE', message: 'server shutting down; reconnect now' };
        if (this.refuseOpened(conn, ws)) return;
        conn.welcomed = true;
        welcome();
      });
    this.admitting.add(admitted);
    void admitted.finally(() => this.admitting.delete(admitted));
    enqueue(conn, () => admitted);
  }

  /** Closes a just-opened connection that admission refused; true when it did. */
  private refuseOpened(conn: Conn, ws: EdgeSocket): boolean {
    const refusal = conn.refusal;
    if (!refusal) return false;
    this.counters.refused++;
    this.release(conn);
    // A browser cannot read a refused upgrade's status, but it can read this and the close reason.
    ws.send(JSON.stringify({ type: 'error', errorCode: refusal.errorCode, errorMsg: refusal.message }));
    ws.end(refusal.close, closeReason(refusal.errorCode, refusal.message));
    return true;
  }

  /** `authorize`, then counts a wrong key against the client address's budget. */
  private async admit(conn: Conn, token: string, client: string): Promise<void> {
    await this.authorize(conn, token);
    if (conn.refusal?.errorCode !== 'UNAUTHORIZED' || !this.failures) return;
    // As REST: a wrong key counts; past the budget the refusal says so, a valid key is still served.
    try {
      const decision = await this.failures.hit(client, 'unauthenticated');
      if (!decision.allowed)
        conn.refusal = { close: CLOSE.RATE_LIMITED, errorCode: 'RATE_LIMITED', message: rateLimited(decision, 'unauthenticated').message };
    } catch (err) {
      this.log.warn({ err }, 'could not count a refused connection');
    }
  }

  /** Authenticates the key the way the API does, then takes a connection lease. */
  private async authorize(conn: Conn, token: string): Promise<void> {
    if (!token) {
      conn.refusal = { close: CLOSE.UNAUTHORIZED, errorCode: 'UNAUTHORIZED', message: 'missing API key: connect to /ws?token=<API_KEY>' };
      return;
    }
    try {
      const operator = await withTimeout(authenticate(this.db, token), CHECK_TIMEOUT_MS);
      const known = this.identity(operator.id, hashApiKey(token).toString('hex'));
      conn.operatorId = known.operatorId;
      conn.keyHash = known.keyHash;
    } catch (err) {
      if (err instanceof AppError && err.code === 'UNAUTHORIZED') {
        conn.refusal = { close: CLOSE.UNAUTHORIZED, errorCode: 'UNAUTHORIZED', message: err.message };
      } else {
        this.log.warn({ err }, 'could not check an API key; refusing the connection');
        conn.refusal = {
          close: CLOSE.SERVICE_UNAVAILABLE,
          errorCode: 'SERVICE_UNAVAILABLE',
          message: 'cannot check the API key right now; retry in a few seconds',
        };
      }
      return;
    }
    const decision = await this.leases.acquire(conn.operatorId, conn.id);
    if (!decision.allowed) {
      conn.refusal = {
        close: CLOSE.RATE_LIMITED,
        errorCode: 'RATE_LIMITED',
        message: `at most ${decision.limit} concurrent connections per operator; close one, then retry`,
      };
      return;
    }
    conn.leased = true;
  }

  private identity(operatorId: string, keyHash: string): { operatorId: string; keyHash: string } {
    const known = this.identities.get(operatorId);
    if (known?.keyHash === keyHash) return known;
    const fresh = { operatorId, keyHash };
    this.identities.delete(operatorId);
    this.identities.set(operatorId, fresh);
    if (this.identities.size > IDENTITY_CACHE) this.identities.delete(this.identities.keys().next().value!);
    return fresh;
  }

  /** Gives the connection's lease back (once). */
  release(conn: Conn): void {
    if (!conn.leased) return;
    conn.leased = false;
    const p = this.leases.release(conn.id).finally(() => this.releases.delete(p));
    this.releases.add(p);
  }

  /** Resolves when every admission and every lease release under way has finished. */
  async released(): Promise<void> {
    await Promise.all([...this.admitting]);
    await Promise.all([...this.releases]);
  }

  /** Closes the connections whose key is no longer live (rotated or revoked). */
  async closeRotated(conns: ReadonlySet<Conn>): Promise<void> {
    if (conns.size === 0) return;
    const hashes = [...new Set([...conns].map((c) => c.keyHash))];
    let live: Set<string>;
    try {
      live = await withTimeout(
        stillLiveKeys(
          this.db,
          hashes.map((h) => Buffer.from(h, 'hex')),
        ),
        CHECK_TIMEOUT_MS,
      );
    } catch (err) {
      this.log.warn({ err }, 'could not re-check the keys of live connections; keeping them until the next check');
      return;
    }
    for (const conn of [...conns]) {
      if (live.has(conn.keyHash) || !conn.open || !conn.ws) continue;
      this.counters.closedRotated++;
      conn.ws.end(CLOSE.UNAUTHORIZED, closeReason('UNAUTHORIZED', 'this API key has been rotated; reconnect with the current key'));
    }
  }
}
