import type { Services } from '../shared/services.js';
import { Throughput } from '../../domain/system/throughput.js';

/** What the api's transports need: the engines and the instance's event-rate counter. */
export interface ApiDeps {
  services: Services;
  throughput: Throughput;
}

export function createApiDeps(services: Services): ApiDeps {
  return { services, throughput: new Throughput(services.redis) };
}
