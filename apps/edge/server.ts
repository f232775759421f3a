import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import uWS from 'uWebSockets.js';
import type { Config } from '../../lib/config.js';
import type { Logger } from '../../lib/logger.js';
import { every } from '../../lib/timers.js';
import { STREAM_SOURCES, type AnyStreamSource } from './sources.js';
import { CLOSE, closeReason } from './protocol.js';
import type { Conn } from './connection.js';
import { Subscriptions, newCounters } from './subscriptions.js';
import { Admission } from './admission.js';
import { Commands } from './commands.js';
import { startTails } from './tails.js';
import { closeEdgeEngines, createEdgeEngines, type EdgeEngines } from './engines.js';

/** Frames above WS_MAX_MESSAGE_BYTES × this are not even read: the connection is dropped. */
export const HARD_FRAME_FACTOR = 4;

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
  /** The caller's engines, which the caller closes; without them the edge creates its own and closes them last. */
  engines?: EdgeEngines;
}

type ShutdownStep = [string, () => Promise<unknown> | unknown];

export interface RunningEdge {
  port: number;
  stats(): EdgeStats;
  /** The shutdown steps in order: stop accepting, stop consuming, close sockets, close the listen socket, then (own engines only) close engines. */
  shutdownSteps(): ShutdownStep[];
  /** Runs the shutdown steps. */
  close(): Promise<void>;
}

/** Starts one edge instance: tails the stream sources, serves /ws and /health. */
export async function startEdge(cfg: Config, log: Logger, opts: EdgeOptions = {}): Promise<RunningEdge> {
  const instanceId = `${hostname()}.${process.pid}.${randomBytes(3).toString('hex')}`;
  const startedAt = Date.now();
  const ownEngines = !opts.engines;
  const { db, redis, kafka } = opts.engines ?? (await createEdgeEngines(cfg, log));
  const counters = newCounters();
  const registry = new Subscriptions<Conn>(cfg, counters, log);
  const admission = new Admission(cfg, log, db, redis, counters);
  const commands = new Commands(cfg, log, db, registry);
  let accepting = true;

  const app = uWS.App();
  app.ws<Conn>('/ws', {
    // Frames up to the hard cap are read and, above WS_MAX_MESSAGE_BYTES, answered with an error;
    // uWebSockets.js drops a connection sending more than the cap without a close frame.
    maxPayloadLength: cfg.WS_MAX_MESSAGE_BYTES * HARD_FRAME_FACTOR,
    // Above WS_MAX_BUFFERED_BYTES the registry closes the connection itself, with a reason; uWS's
    // own limit sits above that so it never drops a message on its own.
    maxBackpressure: cfg.WS_MAX_BUFFERED_BYTES * 2,
    idleTimeout: cfg.WS_IDLE_TIMEOUT_S,
    sendPingsAutomatically: true,
    compression: uWS.DISABLED,
    upgrade: (res, req, context) => admission.upgrade(res, req, context, () => accepting),
    open: (ws) => {
      const conn = ws.getUserData();
      conn.ws = ws;
      conn.open = true;
      admission.opened(
        conn,
        ws,
        () => accepting,
        () => {
          registry.join(conn);
          ws.send(JSON.stringify({ type: 'connected', operatorId: conn.operatorId, timestamp: new Date().toISOString() }));
          counters.messagesSent++;
        },
      );
    },
    message: (ws, message, isBinary) => {
      counters.messagesReceived++;
      commands.receive(ws.getUserData(), message, isBinary);
    },
    close: (ws) => {
      const conn = ws.getUserData();
      conn.open = false;
      conn.ws = null;
      registry.leave(conn);
      admission.release(conn);
    },
  });

  const stats = (): EdgeStats => ({ ...registry.stats(), ...counters });

  const tails = await startTails(kafka, cfg, log, { sources: opts.sources ?? STREAM_SOURCES, instanceId, registry });

  app.get('/health', (res) => {
    const kafkaHealth = tails.health();
    res.cork(() => {
      res.writeHeader('Content-Type', 'application/json').end(
        JSON.stringify({
          status: kafkaHealth.connected && accepting ? 'healthy' : 'degraded',
          accepting,
          kafka: kafkaHealth,
          websocket: { ...stats(), leases: admission.leases.size, redis: redis.status === 'ready' ? 'shared' : 'local-fallback' },
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
        .end(
          JSON.stringify({
            error: `no route for ${req.getMethod().toUpperCase()} ${path}${wsHint}`,
            code: path === '/ws' ? 'VALIDATION_ERROR' : 'NOT_FOUND',
          }),
        );
    });
  });

  const onError = (err: unknown) => log.error({ err }, 'edge timer failed');
  const timers = [
    every(Math.max(500, Math.floor(cfg.WS_LEASE_TTL_MS / 3)), () => admission.leases.refresh(), { onError }),
    every(cfg.WS_KEY_RECHECK_MS, () => admission.closeRotated(registry.conns), { onError }),
  ];

  const listenSocket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(cfg.EDGE_HOST, cfg.EDGE_PORT, (socket) =>
      socket ? resolve(socket) : reject(new Error(`edge could not listen on ${cfg.EDGE_HOST}:${cfg.EDGE_PORT}`)),
    );
  });
  const port = uWS.us_socket_local_port(listenSocket as unknown as uWS.us_socket);
  log.info({ port, host: cfg.EDGE_HOST, instanceId }, 'edge listening');

  let listening = true;
  const steps: ShutdownStep[] = [
    ['stop accepting', () => void (accepting = false)],
    ['stop consuming', () => tails.stop()],
    [
      'close sockets',
      async () => {
        await Promise.all(timers.map((t) => t.stop()));
        for (const conn of [...registry.conns])
          conn.ws?.end(CLOSE.GOING_AWAY, closeReason('SERVICE_UNAVAILABLE', 'server shutting down; reconnect now'));
        await admission.released();
      },
    ],
    [
      'close listen socket',
      () => {
        if (listening) uWS.us_listen_socket_close(listenSocket);
        listening = false;
      },
    ],
    ...(ownEngines ? [['close engines', () => closeEdgeEngines({ db, redis, kafka })] satisfies ShutdownStep] : []),
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
