import type { ConnectorType } from '../../lib/events/vocabulary.js';
import type { GeneratedEvent } from '../traffic/index.js';
import type { SimVenue } from '../venues.js';

/** One vendor delivery to the service's webhook receiver at `POST /hooks/<integrationId>`. */
export interface Delivery {
  integrationId: string;
  connector: ConnectorType;
  /** The raw body exactly as sent (signatures cover these bytes). */
  body: string;
  /** Headers for one attempt, signed at `now` (ms): a retry is signed again (Verkada refuses stale timestamps). */
  headers: (now: number) => Record<string, string>;
  /** Canonical events this delivery carries (observations, payments, counts, readings). */
  events: number;
  /** What it is, for logs: `meraki v2 DevicesSeen`, `square payment.created`… */
  kind: string;
}

/** The secrets and settings the simulator registered for an integration's native link. */
export interface LinkConfig {
  integrationId: string;
  connector: ConnectorType;
  /** The integration's whole config as registered (plain fields and the secrets the simulator chose). */
  config: Record<string, unknown>;
  /** Meraki: which Scanning API version this venue's live posts use. */
  merakiVersion?: 2 | 3;
}

export interface TranslateContext {
  venue: SimVenue;
  link: LinkConfig;
  /** Events before this instant are history (backfill): Meraki sends them as large v3 posts. */
  liveFrom: number;
}

/** A batch of a stream split into what goes through the vendor link and what stays on `POST /ingest`. */
export interface Translated {
  deliveries: Delivery[];
  /** Events with no vendor form (heartbeats, Meraki MT readings, malformed fault twins…): sent to /ingest as before. */
  ingest: GeneratedEvent[];
  /** UniFi: client records handed to the fake controller (served to the poller). */
  records?: UnifiRecord[];
}

/** A `stat/sta` client entry as a UniFi controller lists it. */
export interface UnifiRecord {
  mac: string;
  ap_mac: string;
  essid: string;
  rssi: number;
  first_seen: number;
  last_seen: number;
  is_guest: boolean;
  hostname?: string;
}
