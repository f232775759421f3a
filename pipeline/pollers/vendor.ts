import type { ConnectorType, EventType } from '../../lib/events/vocabulary.js';
import type { Logger } from '../../lib/logger.js';
import type { SourceIntegration } from '../../domain/integrations/sources.js';
import type { HttpRequest, HttpResponse } from './http.js';

/**
 * What one vendor's poller knows: whether an integration's config is polled, how to log in,
 * fetch and map the answer to connector events (the same events `/ingest` takes), and how the
 * cursor advances. The runner (runner.ts) does everything else: ownership, scheduling, backoff,
 * publishing through ingest, writing the cursor, health.
 */

/** A connector event as `/ingest` takes it, always with a deterministic `event_id` (a repeated poll is stored once). */
export interface PolledEvent {
  type: EventType;
  timestamp: string;
  event_id: string;
  payload: Record<string, unknown>;
}

export interface PollResult<C> {
  /** In the order they should be published. */
  events: PolledEvent[];
  /** The cursor once these events are published (written by the runner after ingest took them). */
  cursor: C;
}

export interface PollContext {
  integration: SourceIntegration;
  /** An HTTPS request to the vendor with the integration's pin, the per-request timeout and the runner's stop signal applied. */
  request(req: Pick<HttpRequest, 'method' | 'url' | 'headers' | 'json'>): Promise<HttpResponse>;
  /**
   * The operator's keyed pseudonym of an identifier (HMAC, as ingest computes device pseudonyms):
   * what event ids and cursors name a device by, so neither ever holds a raw MAC.
   */
  idOf(identifier: string): string;
  /** The vendor API's base URL when overridden (VERKADA_API_BASE_URL: tests, private proxies). */
  baseUrl?: string;
  now(): number;
  log: Logger;
}

export interface VendorPoller<S = unknown, C = unknown> {
  /** The connector type of the events (and of the integrations polled). */
  connector: ConnectorType;
  /** For logs and docs: `unifi`, `verkada`, `aruba-ale`. */
  name: string;
  /** Default pause between two polls of one integration. */
  intervalMs: number;
  /**
   * Whether this integration's config is one this poller serves (Aruba Central, Verkada without
   * cameras: not polled). Decided on the plain fields alone: the runner lists without opening secrets.
   */
  polls(config: Record<string, unknown>): boolean;
  /** In-memory state between polls of one integration (a session cookie, a token); new when the config changes. */
  newSession(): S;
  poll(ctx: PollContext, session: S, cursor: C | undefined): Promise<PollResult<C>>;
}

/** Epoch seconds → ISO 8601 UTC. */
export const isoFromSeconds = (s: number): string => new Date(s * 1000).toISOString();
