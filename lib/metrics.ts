import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { Logger } from './logger.js';

/**
 * One Prometheus registry per process (api, edge, pipeline), with the process metrics (CPU, memory,
 * event loop lag, GC) and a `service` label on every series. Each process serves it on a port of its
 * own, never through the front door (docs/metrics.md).
 */
export function createRegistry(service: 'api' | 'edge' | 'pipeline'): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** Gauges read at each scrape from a source given later (a job's stats, a running component); absent until it is. */
export interface ObservedGauges<T> {
  observe(source: T): void;
  gauge(name: string, help: string, read: (source: T) => number): void;
  /** One series per value of `label`. */
  labelled(name: string, help: string, label: string, read: (source: T) => Record<string, number>): void;
}

export function observedGauges<T>(registry: Registry): ObservedGauges<T> {
  let source: T | undefined;
  return {
    observe(s) {
      source = s;
    },
    gauge(name, help, read) {
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          if (source !== undefined) this.set(read(source));
        },
      });
    },
    labelled(name, help, label, read) {
      new Gauge({
        name,
        help,
        labelNames: [label],
        registers: [registry],
        collect() {
          if (source === undefined) return;
          for (const [value, n] of Object.entries(read(source))) this.set({ [label]: value }, n);
        },
      });
    },
  };
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/** `GET /metrics` in the Prometheus text format; anything else is a 404. */
export async function serveMetrics(registry: Registry, host: string, port: number, log: Logger): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"only GET /metrics here","code":"NOT_FOUND"}');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: Error) => {
        log.error({ err }, 'metrics collection failed');
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"metrics collection failed","code":"INTERNAL_ERROR"}');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  log.info({ host, port: bound }, 'metrics listening');
  return {
    port: bound,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Serves the registry unless `port` is 0; a port it cannot bind is logged, not fatal (metrics are not worth an outage). */
export async function startMetrics(registry: Registry, host: string, port: number, log: Logger): Promise<MetricsServer | undefined> {
  if (port === 0) return undefined;
  try {
    return await serveMetrics(registry, host, port, log);
  } catch (err) {
    log.error({ err, host, port }, 'cannot serve metrics on this port; running without them');
    return undefined;
  }
}
