import type { Context, Next } from 'koa';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { QueryGate } from '../../domain/limits/query-gate.js';
import type { Publisher } from '../../lib/kafka.js';
import { createRegistry } from '../../lib/metrics.js';
import type { IngestResult } from '../../domain/ingest/ingest.js';

/** The api's Prometheus metrics (docs/metrics.md). */
export interface ApiMetrics {
  registry: Registry;
  requests: Counter<'method' | 'route' | 'status'>;
  duration: Histogram<'method' | 'route'>;
  ingestEvents: Counter<'outcome' | 'reason'>;
  produce: Histogram<'outcome'>;
  /** Vendor webhook deliveries to /hooks/{integration_id}, by connector and outcome (accepted, refused, invalid, rate_limited, ignored). */
  webhookDeliveries: Counter<'connector' | 'outcome'>;
}

export function createApiMetrics(): ApiMetrics {
  const registry = createRegistry('api');
  return {
    registry,
    requests: new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests answered, by method, declared route and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time to answer an HTTP request, by method and declared route',
      labelNames: ['method', 'route'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    ingestEvents: new Counter({
      name: 'ingest_events_total',
      help: 'Ingested events, accepted or rejected (by reason)',
      labelNames: ['outcome', 'reason'],
      registers: [registry],
    }),
    produce: new Histogram({
      name: 'kafka_produce_duration_seconds',
      help: 'Time for Kafka to acknowledge an ingest batch (acks=all), by outcome',
      labelNames: ['outcome'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
      registers: [registry],
    }),
    webhookDeliveries: new Counter({
      name: 'webhook_deliveries_total',
      help: 'Vendor webhook deliveries, by connector and outcome: accepted, refused (401), invalid (400), rate_limited (429), ignored (taken, nothing to store)',
      labelNames: ['connector', 'outcome'],
      registers: [registry],
    }),
  };
}

/** The query gate's load, read at each scrape (its refusals are the 429s and 503s of the routes). */
export function gateMetrics(m: ApiMetrics, gate: QueryGate): void {
  new Gauge({
    name: 'expensive_queries',
    help: 'Expensive reads (telemetry, dashboard, analytics) of this instance, running or waiting for a turn',
    labelNames: ['state'],
    registers: [m.registry],
    collect() {
      const load = gate.load();
      this.set({ state: 'running' }, load.running);
      this.set({ state: 'waiting' }, load.waiting);
    },
  });
}

/** Counts every answer under the route that matched (`unmatched` otherwise), so label sets stay few. */
export function requestMetrics(m: ApiMetrics) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const stop = m.duration.startTimer();
    try {
      await next();
    } finally {
      const route = (ctx as Context & { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      const status = ctx.respond === false ? ctx.res.statusCode : ctx.status;
      m.requests.inc({ method: ctx.method, route, status: String(status) });
      stop({ method: ctx.method, route });
    }
  };
}

/** The publisher, timed. */
export function timedPublisher(publisher: Publisher, m: ApiMetrics): Publisher {
  return {
    connect: () => publisher.connect(),
    disconnect: () => publisher.disconnect(),
    async publish(batches) {
      const stop = m.produce.startTimer();
      try {
        await publisher.publish(batches);
        stop({ outcome: 'acknowledged' });
      } catch (err) {
        stop({ outcome: 'failed' });
        throw err;
      }
    },
  };
}

/** The kind of a rejection reason (its first problem), as a bounded label. */
const REASONS: Array<[RegExp, string]> = [
  [/^event must be/, 'malformed'],
  [/^(unknown event type|type is required)/, 'type'],
  [/^timestamp/, 'timestamp'],
  [/^event_id/, 'event_id'],
  [/^duplicate/, 'duplicate'],
  [/integration/, 'integration'],
  [/is not an active zone/, 'zone'],
  [/quota/, 'quota'],
  [/^payload/, 'payload'],
];
export const reasonKind = (reason: string): string => REASONS.find(([re]) => re.test(reason))?.[1] ?? 'other';

export function countIngest(m: ApiMetrics, result: IngestResult): void {
  if (result.accepted > 0) m.ingestEvents.inc({ outcome: 'accepted', reason: '' }, result.accepted);
  for (const e of result.errors) m.ingestEvents.inc({ outcome: 'rejected', reason: reasonKind(e.reason) });
}
