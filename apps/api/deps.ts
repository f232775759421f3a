import type { Services } from '../shared/services.js';
import { Throughput } from '../../domain/system/throughput.js';
import { Pseudonyms } from '../../domain/ingest/pseudonyms.js';
import { keyringFromConfig, type Keyring } from '../../lib/secret-box.js';
import type { Publisher } from '../../lib/kafka.js';
import { createApiMetrics, timedPublisher, type ApiMetrics } from './metrics.js';

/** What the api's transports need: the engines, the instance's event-rate counter and its keys. */
export interface ApiDeps {
  services: Services;
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
  return {
    services,
    metrics,
    publisher: timedPublisher(services.publisher, metrics),
    throughput: new Throughput(services.redis),
    keyring: keyringFromConfig(services.cfg),
    pseudonyms: new Pseudonyms(services.cfg.PSEUDONYM_KEY),
  };
}
