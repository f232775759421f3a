import type { Redis } from 'ioredis';
import { AppError, notFound } from '../../../lib/errors.js';
import type { ConnectorType } from '../../../lib/events/vocabulary.js';
import { TtlCache } from '../../../lib/ttl-cache.js';
import { rateLimitHeaders, RateLimiter } from '../../limits/rate-limit.js';
import { reportSourceOutcome, type SourceIntegration } from '../../integrations/sources.js';
import { ingestBatch, MAX_EVENTS_PER_REQUEST, type IngestDeps, type IngestResult } from '../ingest.js';
import { densityReceiver } from './density.js';
import { parseJsonBody, type Receiver, type WebhookRequest } from './kit.js';
import { merakiReceiver } from './meraki.js';
import { squareReceiver } from './square.js';
import { verkadaReceiver } from './verkada.js';

export type { ConnectorEvent, Mapped, Receiver, WebhookRequest } from './kit.js';

/**
 * Vendor webhook receivers: one public URL per integration, `/hooks/{integration_id}`
 * (docs/connectors/*.md). A delivery is authenticated by the vendor's own mechanism, mapped to
 * the connector events `/ingest` takes, and handed to the same `ingestBatch` (validation,
 * pseudonyms, quotas, event ids, the one Kafka publish path), naming the integration as its source.
 */

/** The connector types that push: the others (unifi, aruba, mywifi) are polled or have no webhook. */
export const RECEIVERS: Partial<Record<ConnectorType, Receiver>> = {
  meraki: merakiReceiver,
  verkada: verkadaReceiver,
  square: squareReceiver,
  density: densityReceiver,
};

/** Deliveries one integration may make per minute: a Meraki v2 network of 300 APs × 2 radios. */
export const WEBHOOK_DELIVERIES_PER_MINUTE = 600;
/** How long an integration looked up for a delivery is reused: an update takes effect within it. */
export const INTEGRATION_CACHE_TTL_MS = 5_000;

export type DeliveryOutcome = 'accepted' | 'refused' | 'invalid' | 'rate_limited' | 'ignored';

/**
 * The integrations deliveries name, looked up at most once per TTL each (a Postgres read and the
 * AES-GCM opening of its secrets): 600 posts a minute cost 12 lookups. Unknown ids are remembered
 * too, so garbage ids cost no more. At most `max` entries; the oldest goes first.
 */
export class IntegrationCache {
  private readonly entries: TtlCache<string, SourceIntegration | undefined>;

  constructor(
    private readonly load: (id: string) => Promise<SourceIntegration | undefined>,
    ttlMs = INTEGRATION_CACHE_TTL_MS,
    max = 10_000,
    now: () => number = Date.now,
  ) {
    this.entries = new TtlCache({ ttlMs, max, now });
  }

  /** Concurrent deliveries share one lookup; a failed lookup (Postgres away) is not remembered. */
  get(id: string): Promise<SourceIntegration | undefined> {
    return this.entries.getOrLoad(id, this.load);
  }
}

/**
 * The per-integration delivery limiter: the existing fixed-window limiter with its own instance and
 * limit, counting under `hook:<integration id>` (in the `ingest` bucket's key space, which operator
 * ids never collide with), so the operators' own buckets are untouched.
 */
export function deliveryLimiter(redis: Redis): RateLimiter {
  return new RateLimiter(redis, { limits: { ingest: WEBHOOK_DELIVERIES_PER_MINUTE } });
}

export interface ReceiverDeps {
  /** What ingest needs; its `log` is the request's. `reportsTopic` is required here: refusals are reported on it. */
  ingest: IngestDeps & { reportsTopic: string };
  integrations: IntegrationCache;
  /** Absent when rate limits are off. */
  limiter?: RateLimiter;
  /** Told each delivery's outcome (the metric). */
  observe?: (connector: ConnectorType, outcome: DeliveryOutcome) => void;
}

export interface DeliveryRequest {
  method: string;
  headers: WebhookRequest['headers'];
  /** The raw body, read only once the integration is known to take deliveries (its errors: 413, 415, 400). */
  rawBody: string | (() => Promise<string>);
  now?: Date;
}

export type DeliveryAnswer =
  | { kind: 'text'; text: string }
  | { kind: 'json'; connector: ConnectorType; body: { accepted: number; rejected: number; ignored: number }; results: IngestResult[] };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * One vendor delivery to `/hooks/{integrationId}`: the integration (404 when unknown, inactive or
 * deleted, all alike; 404 for a connector without a receiver), the vendor's authentication (401),
 * the integration's delivery rate (429), the vendor body (400), then ingest (503 when Kafka did not
 * acknowledge). A refused or invalid delivery is reported to connector health; a taken one is 200
 * even when ingest rejected its events one by one (a vendor retry would not help).
 */
export async function receiveDelivery(deps: ReceiverDeps, integrationId: string, request: DeliveryRequest): Promise<DeliveryAnswer> {
  const now = request.now ?? new Date();
  const integration = UUID.test(integrationId) ? await deps.integrations.get(integrationId.toLowerCase()) : undefined;
  if (!integration) throw notFound('integration');
  const receiver = RECEIVERS[integration.connectorType];
  if (!receiver) {
    throw new AppError(
      404,
      'NOT_FOUND',
      `the ${integration.connectorType} connector has no webhook receiver: its events are polled by the service or sent to POST /ingest`,
    );
  }
  const log = deps.ingest.log.child({ integrationId: integration.id, connector: integration.connectorType });
  const observe = (outcome: DeliveryOutcome) => deps.observe?.(integration.connectorType, outcome);
  const refuse = async (err: AppError, outcome: DeliveryOutcome): Promise<never> => {
    observe(outcome);
    log.info({ status: err.status, reason: err.message }, 'webhook delivery refused');
    await reportSourceOutcome(deps.ingest, integration, { link: 'webhook', ok: false, error: err.message }, now.getTime());
    throw err;
  };

  const method = request.method.toUpperCase();
  if (method === 'GET' || method === 'HEAD') {
    if (!receiver.answerGet) {
      // Not a 405: the route takes GET (Meraki's validation), so an Allow header would name it.
      throw new AppError(404, 'NOT_FOUND', `the ${integration.connectorType} webhook takes POST only; GET is Meraki's validation request`);
    }
    return { kind: 'text', text: receiver.answerGet(integration.config) };
  }
  if (method !== 'POST')
    throw new AppError(
      405,
      'METHOD_NOT_ALLOWED',
      `${method} is not allowed on a webhook`,
      { allowed: ['GET', 'POST'] },
      { Allow: 'GET, POST' },
    );

  let rawBody: string;
  try {
    rawBody = typeof request.rawBody === 'string' ? request.rawBody : await request.rawBody();
  } catch (err) {
    if (err instanceof AppError && err.status < 500) await refuse(err, 'invalid');
    throw err;
  }
  const req: WebhookRequest = { method, headers: request.headers, rawBody, now: now.getTime() };
  let parsed: { body: unknown } | undefined;
  const json = () => (parsed ??= { body: parseJsonBody(req) }).body;

  try {
    receiver.verify(integration.config, req, json);
  } catch (err) {
    if (err instanceof AppError) await refuse(err, err.status === 401 ? 'refused' : 'invalid');
    throw err;
  }

  if (deps.limiter) {
    const decision = await deps.limiter.hit(`hook:${integration.id}`, 'ingest');
    if (!decision.allowed) {
      observe('rate_limited');
      throw new AppError(
        429,
        'RATE_LIMITED',
        `this integration made more than ${decision.limit} webhook deliveries this minute; retry in ${decision.resetSeconds} s`,
        { limit: decision.limit, windowSeconds: 60, retryAfter: decision.resetSeconds },
        { ...rateLimitHeaders(decision), 'Retry-After': String(decision.resetSeconds) },
      );
    }
  }

  let mapped;
  try {
    mapped = receiver.map(json(), integration.config, now.getTime());
  } catch (err) {
    if (err instanceof AppError) await refuse(err, 'invalid');
    throw err;
  }
  if (mapped.ignored > 0) log.debug({ ignored: mapped.ignored, why: mapped.ignoredWhy }, 'webhook delivery: parts ignored');

  const results: IngestResult[] = [];
  for (let i = 0; i < mapped.events.length; i += MAX_EVENTS_PER_REQUEST) {
    const { result } = await ingestBatch(
      { ...deps.ingest, log },
      {
        operator: integration.operator,
        venueId: integration.venueId,
        connectorType: integration.connectorType,
        events: mapped.events.slice(i, i + MAX_EVENTS_PER_REQUEST),
        source: { integrationId: integration.id, link: 'webhook' },
      },
      now,
    );
    results.push(result);
  }
  if (results.length === 0) {
    // Nothing to ingest (all ignored): still a sign the link works.
    await reportSourceOutcome(deps.ingest, integration, { link: 'webhook', ok: true }, now.getTime());
  }
  const accepted = results.reduce((n, r) => n + r.accepted, 0);
  const rejected = results.reduce((n, r) => n + r.rejected, 0);
  if (rejected > 0)
    log.debug(
      { rejected, reasons: results.flatMap((r) => r.errors.slice(0, 3).map((e) => e.reason)).slice(0, 5) },
      'webhook delivery: events rejected',
    );
  observe(mapped.events.length === 0 ? 'ignored' : 'accepted');
  return { kind: 'json', connector: integration.connectorType, body: { accepted, rejected, ignored: mapped.ignored }, results };
}
