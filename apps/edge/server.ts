import { hostname } from 'node:os';
import { randomBytes, randomUUID } from 'node:crypto';
import uWS from 'uWebSockets.js';
import type { Redis } from 'ioredis';
import type { Config } from '../../lib/config.js';
import type { Logger } from '../../lib/logger.js';
import { AppError } from '../../lib/errors.js';
import { createKafka, ensureTopics } from '../../lib/kafka.js';
import { createRedis } from '../../lib/redis.js';
import { runLiveTail, type RunningConsumer } from '../../lib/consumer.js';
import { createDb, type Db } from '../../postgres/client.js';
import { authenticate, stillLiveKeys } from '../../domain/tenants/operators.js';
import { hashApiKey } from '../../domain/tenants/api-keys.js';
import { ownedVenue } from '../../domain/venues/access.js';
import { ConnectionLeases } from '../../domain/limits/connections.js';
import { RateLimiter, rateLimited } from '../../domain/limits/rate-limit.js';
import { resolveClientAddress, trustedPeers } from '../../lib/client-address.js';
import { STREAM_SOURCES, type AnyStreamSource, type StreamItem } from './sources.js';
import { CLOSE, closeReason, parseMessage, pickMetrics, type Command, type CommandError, type CommandErrorCode } from './protocol.js';
import type { TelemetryKey } from '../../lib/events.js';

/** A Postgres answer slower than this counts as Postgres being away for a connecting client. */
const CHECK_TIMEOUT_MS = 5000;
/** Client messages waiting for their replies on one connection; more are refused, not queued. */
const MAX_PENDING_MESSAGES = 32;
/** Queued pushes after which a batch is flushed to the sockets before reading on. */
const FLUSH_EVERY = 5000;
/** Frames above WS_MAX_MESSAGE_BYTES × this are not even read: the connection is dropped. */
export const HARD_FRAME_FACTOR = 4;
/** How long start-up waits for every consumer's first fetch (its position at the topic's end) before listening anyway. */
const READY_TIMEOUT_MS = 30_000;
/** Operators whose id and key hash strings are remembered, so their connections share one copy of each. */
const IDENTITY_CACHE = 8192;
/** The queue of a connection with no message waiting: one settled promise shared by all of them. */
const IDLE: Promise<void> = Promise.resolve();

interface Subscription {
  cmdId: number;
  venueId: string;
  keys: TelemetryKey[];
  /** Subscriptions with equal keys and cmdId get the same bytes: serialised once per event. */
  shape: string;
  conn: Conn;
}

/** Pushes gathered over part of a Kafka batch, sent per connection in one corked write. */
interface Outbox {
  byConn: Map<Conn, string[]>;
  size: number;
}

interface Refusal {
  close: number;
  errorCode: string;
  message: string;
}

interface Conn {
  /** Past the address's wrong-key budget: answered 429 instead of upgrading. */
  limited: AppError | null;
  /** Also the connection's lease id. */
  id: string;
  operatorId: string;
  /** SHA-256 of the key, hex: re-checked so a rotated key's connections close. Never the key itself. */
  keyHash: string;
  refusal: Refusal | null;
  leased: boolean;
  open: boolean;
  ws: uWS.WebSocket<Conn> | null;
  /**
   * The connection's subscriptions by cmdId: none, the only one, or a Map from the second on (most
   * connections hold one; a Map costs ~180 bytes of heap per connection). Read through `subsOf`,
   * `subCount`, `subGet`; changed only by `addSub` / `removeSub`.
   */
  subs: null | Subscription | Map<number, Subscription>;
  pending: number;
  /** The connection's messages in order; `IDLE` when none is waiting. */
  queue: Promise<void>;
}

const subsOf = (conn: Conn): Subscription[] => (conn.subs === null ? [] : conn.subs instanceof Map ? [...conn.subs.values()] : [conn.subs]);
const subCount = (conn: Conn): number => (conn.subs === null ? 0 : conn.subs instanceof Map ? conn.subs.size : 1);
const subGet = (conn: Conn, cmdId: number): Subscription | undefined =>
  conn.subs === null ? undefined : conn.subs instanceof Map ? conn.subs.get(cmdId) : conn.subs.cmdId === cmdId ? conn.subs : undefined;

export interface EdgeStats {
  connections: number;
  operators: number;
  subscriptions: number;
  refused: number;
  closedSlow: number;
  closedRotated: number;
  /** Frames sent to clients (pushes, replies) and received from them, since start. */
  messagesSent: number;
  messagesReceived: number;
}

export interface EdgeOptions {
  /** Overrides STREAM_SOURCES (tests). */
  sources?: readonly AnyStreamSource[];
}

export interface RunningEdge {
  port: number;
  stats(): EdgeStats;
  /** The shutdown steps in order: stop accepting, stop consuming, close sockets, close the listen socket, close engines. */
  shutdownSteps(): Array<[string, () => Promise<unknown> | unknown]>;
  /** Runs the shutdown steps. */
  close(): Promise<void>;
}

async function within<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The TCP peer as text; uWS writes an IPv4 peer of a dual-stack socket in full IPv6 form. */
function peerAddress(res: uWS.HttpResponse): string {
  const text = Buffer.from(res.getRemoteAddressAsText()).toString('latin1');
  const mapped = /^(?:0{1,4}:){5}ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(text);
  if (!mapped) return text;
  const [hi, lo] = [parseInt(mapped[1]!, 16), parseInt(mapped[2]!, 16)];
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** Starts one edge instance: tails the stream sources, serves /ws and /health. */
export async function startEdge(cfg: Config, log: Logger, opts: EdgeOptions = {}): Promise<RunningEdge> {
  const sources = opts.sources ?? STREAM_SOURCES;
  const instanceId = `${hostname()}.${process.pid}.${randomBytes(3).toString('hex')}`;
  const startedAt = Date.now();
  const db: Db = createDb(cfg, 4, log);
  const redis: Redis = createRedis(cfg);
  redis.on('error', (err) => log.debug({ err: err.message }, 'redis error'));
  await redis.connect().catch((err: Error) => log.warn({ err: err.message }, 'redis unavailable at start-up; connection limit counted per instance until it answers'));
  const leases = new ConnectionLeases(redis, { limit: cfg.WS_MAX_CONNECTIONS_PER_OPERATOR, ttlMs: cfg.WS_LEASE_TTL_MS, log });
  // The api's budget of wrong keys per client address (same Redis keys): guesses over REST and /ws share it.
  const failures = cfg.RATE_LIMITS_ENABLED ? new RateLimiter(redis, { limits: { unauthenticated: cfg.UNAUTHENTICATED_RATE_LIMIT } }) : undefined;
  const isTrusted = trustedPeers(cfg.TRUSTED_PROXIES);

  const conns = new Set<Conn>();
  const byVenue = new Map<string, Set<Subscription>>();
  /** Recent operators' id and key hash (insertion order, the oldest dropped past IDENTITY_CACHE): one copy of each string per operator, not per connection. */
  const identities = new Map<string, { operatorId: string; keyHash: string }>();
  const identity = (operatorId: string, keyHash: string) => {
    const known = identities.get(operatorId);
    if (known?.keyHash === keyHash) return known;
    const fresh = { operatorId, keyHash };
    identities.delete(operatorId);
    identities.set(operatorId, fresh);
    if (identities.size > IDENTITY_CACHE) identities.delete(identities.keys().next().value!);
    return fresh;
  };
  const releases = new Set<Promise<void>>();
  const counters = { refused: 0, closedSlow: 0, closedRotated: 0, messagesSent: 0, messagesReceived: 0 };
  let accepting = true;

  // ---- connections and subscriptions ----

  const send = (conn: Conn, message: unknown) => {
    if (conn.open && conn.ws) deliver(conn, JSON.stringify(message));
  };
  const replyError = (conn: Conn, cmdId: number | null, errorCode: CommandErrorCode, errorMsg: string) => send(conn, { cmdId, errorCode, errorMsg } satisfies CommandError);

  /** Sends, or closes the connection as a slow consumer: a push is never dropped silently. */
  function deliver(conn: Conn, text: string): void {
    deliverAll(conn, [text]);
  }

  /** Sends in one corked write (one syscall for many pushes); stops and closes on a slow consumer. */
  function deliverAll(conn: Conn, texts: string[]): void {
    const ws = conn.ws!;
    let dropped = false;
    ws.cork(() => {
      for (const text of texts) {
        if (ws.send(text) === 2 || ws.getBufferedAmount() > cfg.WS_MAX_BUFFERED_BYTES) {
          dropped = true;
          break;
        }
        counters.messagesSent++;
      }
    });
    const buffered = ws.getBufferedAmount();
    if (dropped || buffered > cfg.WS_MAX_BUFFERED_BYTES) {
      counters.closedSlow++;
      log.warn({ operatorId: conn.operatorId, buffered }, 'closing a slow consumer');
      ws.end(CLOSE.SLOW_CONSUMER, closeReason('SLOW_CONSUMER', `more than ${cfg.WS_MAX_BUFFERED_BYTES} bytes unread; reconnect and read faster`));
    }
  }

  function removeSub(sub: Subscription): void {
    const conn = sub.conn;
    if (conn.subs instanceof Map) {
      conn.subs.delete(sub.cmdId);
      if (conn.subs.size === 1) conn.subs = conn.subs.values().next().value!;
    } else if (conn.subs === sub) conn.subs = null;
    const set = byVenue.get(sub.venueId);
    set?.delete(sub);
    if (set?.size === 0) byVenue.delete(sub.venueId);
  }

  function addSub(sub: Subscription): void {
    const conn = sub.conn;
    const old = subGet(conn, sub.cmdId);
    if (old) removeSub(old);
    if (conn.subs === null) conn.subs = sub;
    else if (conn.subs instanceof Map) conn.subs.set(sub.cmdId, sub);
    else conn.subs = new Map([[conn.subs.cmdId, conn.subs], [sub.cmdId, sub]]);
    let set = byVenue.get(sub.venueId);
    if (!set) byVenue.set(sub.venueId, (set = new Set()));
    // The venue's subscriptions share one copy of its id.
    else sub.venueId = set.values().next().value!.venueId;
    set.add(sub);
  }

  /** Queues the item's pushes per connection; `flush` sends them. */
  function fanOut(item: StreamItem, outbox: Outbox): void {
    const subs = byVenue.get(item.venueId);
    if (!subs) return;
    const bytes = new Map<string, string | null>();
    for (const sub of subs) {
      const conn = sub.conn;
      if (!conn.open || conn.operatorId !== item.operatorId) continue;
      let text = bytes.get(sub.shape);
      if (text === undefined) {
        const metrics = item.alarm ? {} : pickMetrics(item.metrics, sub.keys);
        const zone = item.zoneId === undefined ? {} : { zoneId: item.zoneId };
        const alarm = item.alarm ? { alarm: item.alarm } : {};
        text = metrics && JSON.stringify({ cmdId: sub.cmdId, data: { venueId: item.venueId, ...zone, eventType: item.eventType, metrics, ...alarm, time: item.time } });
        bytes.set(sub.shape, text);
      }
      if (text === null) continue;
      const queued = outbox.byConn.get(conn);
      if (queued) queued.push(text);
      else outbox.byConn.set(conn, [text]);
      outbox.size++;
    }
  }

  function flush(outbox: Outbox): void {
    for (const [conn, texts] of outbox.byConn) if (conn.open && conn.ws) deliverAll(conn, texts);
    outbox.byConn.clear();
    outbox.size = 0;
  }

  async function runCommand(conn: Conn, cmd: Command): Promise<void> {
    if (cmd.kind === 'subscribe') {
      if (!subGet(conn, cmd.cmdId) && subCount(conn) >= cfg.WS_MAX_SUBSCRIPTIONS) {
        return replyError(conn, cmd.cmdId, 'SUBSCRIPTION_LIMIT', `at most ${cfg.WS_MAX_SUBSCRIPTIONS} subscriptions per connection; unsubscribe one first`);
      }
      try {
        await within(CHECK_TIMEOUT_MS, ownedVenue(db, conn.operatorId, cmd.venueId));
      } catch (err) {
        if (err instanceof AppError && (err.code === 'NOT_FOUND' || err.code === 'FORBIDDEN')) {
          return replyError(conn, cmd.cmdId, err.code, err.code === 'NOT_FOUND' ? 'venue not found (absent or deleted)' : err.message);
        }
        log.warn({ err: (err as Error).message }, 'could not check a venue for a subscription');
        return replyError(conn, cmd.cmdId, 'SERVICE_UNAVAILABLE', 'could not check the venue right now; retry in a few seconds');
      }
      if (!conn.open) return;
      addSub({ cmdId: cmd.cmdId, venueId: cmd.venueId, keys: cmd.keys, shape: `${cmd.cmdId}|${cmd.keys.join(',')}`, conn });
      return send(conn, { cmdId: cmd.cmdId, type: 'subscribed', entityId: cmd.venueId, keys: cmd.keys });
    }
    if (cmd.kind === 'unsubscribe') {
      const sub = subGet(conn, cmd.cmdId);
      if (!sub || (cmd.venueId !== null && sub.venueId !== cmd.venueId)) {
        return replyError(conn, cmd.cmdId, 'NOT_FOUND', `no subscription with cmdId ${cmd.cmdId}${cmd.venueId ? ' for this venue' : ''} on this connection`);
      }
      removeSub(sub);
      return send(conn, { cmdId: cmd.cmdId, type: 'unsubscribed', entityId: sub.venueId, cmdIds: [sub.cmdId] });
    }
    const subs = subsOf(conn).filter((s) => s.venueId === cmd.venueId);
    if (subs.length === 0) return replyError(conn, cmd.cmdId, 'NOT_FOUND', 'no subscription to this venue on this connection');
    subs.forEach(removeSub);
    return send(conn, { cmdId: cmd.cmdId, type: 'unsubscribed', entityId: cmd.venueId, cmdIds: subs.map((s) => s.cmdId) });
  }

  async function handleText(conn: Conn, text: string): Promise<void> {
    const { commands, errors } = parseMessage(text);
    for (const e of errors) send(conn, e);
    for (const cmd of commands) {
      if (!conn.open) return;
      await runCommand(conn, cmd);
    }
  }

  /** `authorize`, then counts a wrong key against the client address's budget. */
  async function admit(token: string, client: string): Promise<Conn> {
    const conn = await authorize(token);
    if (conn.refusal?.errorCode !== 'UNAUTHORIZED' || !failures) return conn;
    // As REST: a wrong key counts; past the budget the answer is 429, a valid key is still served.
    try {
      const decision = await failures.hit(client, 'unauthenticated');
      if (!decision.allowed) conn.limited = rateLimited(decision, 'unauthenticated');
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'could not count a refused upgrade');
    }
    return conn;
  }

  /** Authenticates the key the way the API does, then takes a connection lease. */
  async function authorize(token: string): Promise<Conn> {
    const conn: Conn = { limited: null, id: randomUUID(), operatorId: '', keyHash: '', refusal: null, leased: false, open: false, ws: null, subs: null, pending: 0, queue: IDLE };
    if (!token) {
      conn.refusal = { close: CLOSE.UNAUTHORIZED, errorCode: 'UNAUTHORIZED', message: 'missing API key: connect to /ws?token=<API_KEY>' };
      return conn;
    }
    try {
      const operator = await within(CHECK_TIMEOUT_MS, authenticate(db, token));
      const known = identity(operator.id, hashApiKey(token).toString('hex'));
      conn.operatorId = known.operatorId;
      conn.keyHash = known.keyHash;
    } catch (err) {
      if (err instanceof AppError && err.code === 'UNAUTHORIZED') {
        conn.refusal = { close: CLOSE.UNAUTHORIZED, errorCode: 'UNAUTHORIZED', message: err.message };
      } else {
        log.warn({ err: (err as Error).message }, 'could not check an API key; refusing the connection');
        conn.refusal = { close: CLOSE.SERVICE_UNAVAILABLE, errorCode: 'SERVICE_UNAVAILABLE', message: 'cannot check the API key right now; retry in a few seconds' };
      }
      return conn;
    }
    const decision = await leases.acquire(conn.operatorId, conn.id);
    if (!decision.allowed) {
      conn.refusal = {
        close: CLOSE.RATE_LIMITED,
        errorCode: 'RATE_LIMITED',
        message: `at most ${decision.limit} concurrent connections per operator; close one, then retry`,
      };
      return conn;
    }
    conn.leased = true;
    return conn;
  }

  const release = (conn: Conn) => {
    if (!conn.leased) return;
    conn.leased = false;
    const p = leases.release(conn.id).finally(() => releases.delete(p));
    releases.add(p);
  };

  // ---- the server ----

  const app = uWS.App();
  app.ws<Conn>('/ws', {
    // Frames up to the hard cap are read and, above WS_MAX_MESSAGE_BYTES, answered with an error;
    // uWebSockets.js drops a connection sending more than the cap without a close frame.
    maxPayloadLength: cfg.WS_MAX_MESSAGE_BYTES * HARD_FRAME_FACTOR,
    // Above WS_MAX_BUFFERED_BYTES deliver() closes the connection itself, with a reason; uWS's own
    // limit sits above that so it never drops a message on its own.
    maxBackpressure: cfg.WS_MAX_BUFFERED_BYTES * 2,
    idleTimeout: cfg.WS_IDLE_TIMEOUT_S,
    sendPingsAutomatically: true,
    compression: uWS.DISABLED,
    upgrade: (res, req, context) => {
      // The request object is gone after the first await: copy what the upgrade needs now.
      const secKey = req.getHeader('sec-websocket-key');
      const protocol = req.getHeader('sec-websocket-protocol');
      const extensions = req.getHeader('sec-websocket-extensions');
      const token = req.getQuery('token') ?? '';
      const client = resolveClientAddress(isTrusted, peerAddress(res), req.getHeader('x-forwarded-for'));
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
      });
      if (!accepting) {
        res.cork(() => {
          res
            .writeStatus('503 Service Unavailable')
            .writeHeader('Content-Type', 'application/json')
            .writeHeader('Retry-After', '1')
            .end(JSON.stringify({ error: 'this edge is shutting down; reconnect', code: 'SERVICE_UNAVAILABLE' }));
        });
        return;
      }
      void admit(token, client).then(
        (conn) => {
          if (aborted) return release(conn);
          const limited = conn.limited;
          if (limited) {
            counters.refused++;
            res.cork(() => {
              res.writeStatus('429 Too Many Requests').writeHeader('Content-Type', 'application/json');
              for (const [name, value] of Object.entries(limited.headers)) res.writeHeader(name, value);
              res.end(JSON.stringify(limited.toBody()));
            });
            return;
          }
          if (!accepting && !conn.refusal) conn.refusal = { close: CLOSE.GOING_AWAY, errorCode: 'SERVICE_UNAVAILABLE', message: 'server shutting down; reconnect now' };
          res.cork(() => res.upgrade(conn, secKey, protocol, extensions, context));
        },
        (err: Error) => {
          log.error({ err }, 'connection admission failed');
          if (!aborted) res.cork(() => res.writeStatus('500 Internal Server Error').end());
        },
      );
    },
    open: (ws) => {
      const conn = ws.getUserData();
      conn.ws = ws;
      conn.open = true;
      if (conn.refusal) {
        counters.refused++;
        // A browser cannot read a refused upgrade's status, but it can read this and the close reason.
        ws.send(JSON.stringify({ type: 'error', errorCode: conn.refusal.errorCode, errorMsg: conn.refusal.message }));
        ws.end(conn.refusal.close, closeReason(conn.refusal.errorCode, conn.refusal.message));
        return;
      }
      conns.add(conn);
      ws.send(JSON.stringify({ type: 'connected', operatorId: conn.operatorId, timestamp: new Date().toISOString() }));
      counters.messagesSent++;
    },
    message: (ws, message, isBinary) => {
      counters.messagesReceived++;
      const conn = ws.getUserData();
      if (conn.refusal || !conn.open) return;
      if (isBinary) return replyError(conn, null, 'VALIDATION_ERROR', 'send commands as JSON text frames');
      if (message.byteLength > cfg.WS_MAX_MESSAGE_BYTES) {
        return replyError(conn, null, 'VALIDATION_ERROR', `message of ${message.byteLength} bytes; at most ${cfg.WS_MAX_MESSAGE_BYTES}`);
      }
      if (conn.pending >= MAX_PENDING_MESSAGES) {
        return replyError(conn, null, 'RATE_LIMITED', `more than ${MAX_PENDING_MESSAGES} messages waiting for replies; wait for them, then resend`);
      }
      // The ArrayBuffer is only valid during this callback: decode (copy) it now.
      const text = Buffer.from(message).toString('utf8');
      conn.pending++;
      conn.queue = conn.queue
        .then(() => handleText(conn, text))
        .catch((err: Error) => {
          log.error({ err }, 'a client command failed');
          replyError(conn, null, 'SERVICE_UNAVAILABLE', 'the command failed; retry');
        })
        .finally(() => {
          // Nothing left in the chain: drop it, so an idle connection keeps no promise of its own.
          if (--conn.pending === 0) conn.queue = IDLE;
        });
    },
    close: (ws) => {
      const conn = ws.getUserData();
      conn.open = false;
      conn.ws = null;
      if (conns.delete(conn)) for (const sub of subsOf(conn)) removeSub(sub);
      release(conn);
    },
  });

  const stats = (): EdgeStats => {
    const operators = new Set<string>();
    let subscriptions = 0;
    for (const c of conns) {
      operators.add(c.operatorId);
      subscriptions += subCount(c);
    }
    return { connections: conns.size, operators: operators.size, subscriptions, ...counters };
  };

  // ---- the stream sources ----

  const kafka = createKafka(cfg, log, `${cfg.KAFKA_CLIENT_ID}-edge`);
  // The configured topics, derived streams included: the edge may start before the pipeline.
  await ensureTopics(kafka, cfg);
  const tails = sources.map((source) => ({ source, topic: source.topic(cfg.KAFKA_TOPIC_PREFIX), tailed: 0, undecodable: 0, lastMessageAt: null as number | null, connected: false, ready: false }));
  const consumers: RunningConsumer[] = [];
  let markReady: () => void = () => undefined;
  const allReady = new Promise<void>((resolve) => (markReady = resolve));
  for (const tail of tails) {
    const slog = log.child({ source: tail.source.name });
    // Every edge instance must see every partition, so each one is its own consumer group and
    // starts at the topic's end: the stream is live, history comes from the REST API.
    consumers.push(
      await runLiveTail(kafka, slog, {
        groupId: `${cfg.KAFKA_TOPIC_PREFIX}.edge.${instanceId}.${tail.source.name}`,
        topic: tail.topic,
        onCreate: (consumer) => {
          consumer.on(consumer.events.CRASH, () => (tail.connected = false));
          consumer.on(consumer.events.FETCH_START, () => (tail.connected = true));
          // The first completed fetch means the tail is reading from the end offsets it took at start.
          consumer.on(consumer.events.FETCH, () => {
            if (tail.ready) return;
            tail.ready = true;
            if (tails.every((t) => t.ready)) markReady();
          });
        },
        eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
          const outbox: Outbox = { byConn: new Map(), size: 0 };
          for (const message of batch.messages) {
            if (!isRunning() || isStale()) break;
            // Every stream is keyed by venue: a venue nobody here watches is not even decoded.
            const key = message.key?.toString();
            if (key === undefined || byVenue.has(key)) {
              let items: StreamItem[] = [];
              try {
                items = tail.source.toItems(tail.source.decode(message.value));
              } catch (err) {
                tail.undecodable++;
                slog.warn({ partition: batch.partition, offset: message.offset, err: (err as Error).message }, 'message does not decode; not pushed');
              }
              for (const item of items) fanOut(item, outbox);
            }
            if (outbox.size >= FLUSH_EVERY) flush(outbox);
            tail.tailed++;
            resolveOffset(message.offset);
          }
          flush(outbox);
          tail.lastMessageAt = Date.now();
          await heartbeat();
        },
      }),
    );
  }
  await within(READY_TIMEOUT_MS, allReady).catch(() => log.warn('stream sources not positioned yet; listening anyway'));

  app.get('/health', (res) => {
    const kafkaConnected = tails.every((t) => t.connected);
    res.cork(() => {
      res.writeHeader('Content-Type', 'application/json').end(
        JSON.stringify({
          status: kafkaConnected && accepting ? 'healthy' : 'degraded',
          accepting,
          kafka: {
            connected: kafkaConnected,
            sources: tails.map((t) => ({
              name: t.source.name,
              topic: t.topic,
              ready: t.ready,
              messagesTailed: t.tailed,
              undecodable: t.undecodable,
              lastMessageAt: t.lastMessageAt && new Date(t.lastMessageAt).toISOString(),
            })),
          },
          websocket: { ...stats(), leases: leases.size, redis: redis.status === 'ready' ? 'shared' : 'local-fallback' },
          memory: { rssBytes: process.memoryUsage.rss(), heapUsedBytes: process.memoryUsage().heapUsed },
          uptime: Math.floor((Date.now() - startedAt) / 1000),
        }),
      );
    });
  });
  app.any('/*', (res, req) => {
    const path = req.getUrl();
    const wsHint = path === '/ws' ? ': /ws takes a WebSocket upgrade' : '';
    res.cork(() => {
      res
        .writeStatus(path === '/ws' ? '426 Upgrade Required' : '404 Not Found')
        .writeHeader('Content-Type', 'application/json')
        .end(JSON.stringify({ error: `no route for ${req.getMethod().toUpperCase()} ${path}${wsHint}`, code: path === '/ws' ? 'VALIDATION_ERROR' : 'NOT_FOUND' }));
    });
  });

  // ---- timers: lease refresh and key re-check ----

  let timersStopped = false;
  const timers = new Set<NodeJS.Timeout>();
  const every = (ms: number, work: () => Promise<void>) => {
    const tick = () => {
      const t = setTimeout(() => {
        timers.delete(t);
        void work()
          .catch((err: Error) => log.error({ err }, 'edge timer failed'))
          .finally(() => {
            if (!timersStopped) tick();
          });
      }, ms);
      timers.add(t);
    };
    tick();
  };
  every(Math.max(500, Math.floor(cfg.WS_LEASE_TTL_MS / 3)), () => leases.refresh());
  every(cfg.WS_KEY_RECHECK_MS, async () => {
    if (conns.size === 0) return;
    const hashes = [...new Set([...conns].map((c) => c.keyHash))];
    let live: Set<string>;
    try {
      live = await within(CHECK_TIMEOUT_MS, stillLiveKeys(db, hashes.map((h) => Buffer.from(h, 'hex'))));
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'could not re-check the keys of live connections; keeping them until the next check');
      return;
    }
    for (const conn of [...conns]) {
      if (live.has(conn.keyHash) || !conn.open || !conn.ws) continue;
      counters.closedRotated++;
      conn.ws.end(CLOSE.UNAUTHORIZED, closeReason('UNAUTHORIZED', 'this API key has been rotated; reconnect with the current key'));
    }
  });

  // ---- listen ----

  const listenSocket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(cfg.EDGE_HOST, cfg.EDGE_PORT, (socket) => (socket ? resolve(socket) : reject(new Error(`edge could not listen on ${cfg.EDGE_HOST}:${cfg.EDGE_PORT}`))));
  });
  const port = uWS.us_socket_local_port(listenSocket as unknown as uWS.us_socket);
  log.info({ port, host: cfg.EDGE_HOST, instanceId }, 'edge listening');

  let listening = true;
  const steps: Array<[string, () => Promise<unknown> | unknown]> = [
    ['stop accepting', () => void (accepting = false)],
    ['stop consuming', () => Promise.all(consumers.map((c) => c.stop()))],
    [
      'close sockets',
      async () => {
        timersStopped = true;
        for (const t of timers) clearTimeout(t);
        for (const conn of [...conns]) conn.ws?.end(CLOSE.GOING_AWAY, closeReason('SERVICE_UNAVAILABLE', 'server shutting down; reconnect now'));
        await Promise.all([...releases]);
      },
    ],
    [
      'close listen socket',
      () => {
        if (listening) uWS.us_listen_socket_close(listenSocket);
        listening = false;
      },
    ],
    [
      'close engines',
      async () => {
        redis.disconnect();
        await db.end();
      },
    ],
  ];
  let closing: Promise<void> | undefined;
  return {
    port,
    stats,
    shutdownSteps: () => steps,
    close: () =>
      (closing ??= (async () => {
        for (const [name, step] of steps) {
          try {
            await step();
          } catch (err) {
            log.error({ err, step: name }, 'edge shutdown step failed');
          }
        }
      })()),
  };
}
