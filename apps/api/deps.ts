import type { Services } from '../shared/services.js';
import { Throughput } from '../../domain/system/throughput.js';
import { Pseudonyms } from '../../domain/ingest/pseudonyms.js';
import { keyringFromConfig, type Keyring } from '../../lib/secret-box.js';

/** What the api's transports need: the engines, the instance's event-rate counter and its keys. */
export interface ApiDeps {
  services: Services;
  throughput: Throughput;
  /** Seals and opens integration secrets. */
  keyring: Keyring;
  /** Replaces MACs by per-operator pseudonyms at ingest. */
  pseudonyms: Pseudonyms;
}

export function createApiDeps(services: Services): ApiDeps {
  return {
    services,
    throughput: new Throughput(services.redis),
    keyring: keyringFromConfig(services.cfg),
    pseudonyms: new Pseudonyms(services.cfg.PSEUDONYM_KEY),
  };
}
