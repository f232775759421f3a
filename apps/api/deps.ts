import type { Services } from '../shared/services.js';
import { withSettings } from '../../clickhouse/client.js';
import { QueryGate } from '../../domain/limits/query-gate.js';
import { readLimits } from '../../domain/limits/query-limits.js';
import { Throughput } from '../../domain/system/throughput.js';
import { Pseudonyms } from '../../domain/ingest/pseudonyms.js';
import { keyringFromConfig, type Keyring } from '../../lib/secret-box.js';
import type { Publisher } from '../../lib/kafka.js';
import type { Logger } from '../../lib/logger.js';
import { derivedTopicNames } from '../../lib/topology.js';
import type { IngestDeps } from '../../domain/ingest/ingest.js';
import { createApiMetrics, gateMetrics, timedPublisher, type ApiMetrics } from './metrics.js';

/** What the api's transports need: the engines, the instance's event-rate counter and its keys. */
export interface ApiDeps {
  /** The process's engines; its ClickHouse client carries the per-query read limits. */
  services: Services;
  /** Turns of the expensive reads, per operator (docs/limits.md). */
  queryGate: QueryGate;
  throughput: Throughput;
  /** Seals and opens integration secrets. */
  keyring: Keyring;
  /** Replaces MACs by per-operator pseudonyms at ingest. */
  pseudonyms: Pseudonyms;
  /** Ingest's publisher to the events topic, timed. */
  publisher: Publisher;
  metrics: ApiMetrics;
}

export function createApiDeps(services: Services): ApiDeps {
  const metrics = createApiMetrics();
  const { cfg } = services;
  const queryGate = new QueryGate({
    perOperator: cfg.EXPENSIVE_QUERIES_PER_OPERATOR,
    total: cfg.EXPENSIVE_QUERIES_PER_INSTANCE,
    maxWaiting: cfg.EXPENSIVE_QUERIES_MAX_WAITING,
    maxWaitMs: cfg.EXPENSIVE_QUERY_MAX_WAIT_MS,
  });
  gateMetrics(metrics, queryGate);
  return {
    services: { ...services, ch: withSettings(services.ch, readLimits(cfg)) },
    queryGate,
    metrics,
    publisher: timedPublisher(services.publisher, metrics),
    throughput: new Throughput(services.redis),
    keyring: keyringFromConfig(services.cfg),
    pseudonyms: new Pseudonyms(services.cfg.PSEUDONYM_KEY),
  };
}

/** What ingest needs of the api's engines, with the request's logger: `/ingest` and the webhook receivers alike. */
export function ingestDepsOf(deps: ApiDeps, log: Logger): IngestDeps & { reportsTopic: string } {
  const { db, topics, cfg } = deps.services;
  return {
    db,
    publisher: deps.publisher,
    topic: topics.events,
    reportsTopic: derivedTopicNames(cfg.KAFKA_TOPIC_PREFIX).ingestReports,
    pseudonyms: deps.pseudonyms,
    throughput: deps.throughput,
    log,
  };
}
