import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { Message } from 'kafkajs';
import type { Db } from '../../postgres/client.js';
import { activeZones } from '../../postgres/queries/zones.js';
import { liveIntegrationSummaries } from '../../postgres/queries/integrations.js';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import { encodeIngestReport, type IngestReport, type SourceOutcome } from '../../lib/events/derived.js';
import type { ConnectorType, EventType } from '../../lib/events/vocabulary.js';
import { encodeEventMessages } from '../../lib/events/wire.js';
import type { Publisher } from '../../lib/kafka.js';
import type { HmacSha256Key } from '../../lib/hmac-sha256.js';
import type { Logger } from '../../lib/logger.js';
import { unavailable } from '../../lib/errors.js';
import type { Operator } from '../tenants/operators.js';
import { PLAN_LIMITS } from '../tenants/plans.js';
import { ownedVenue } from '../venues/access.js';
import { releaseIngestEvents, reserveIngestEvents } from '../limits/quotas.js';
import type { Throughput } from '../system/throughput.js';
import { CONNECTORS, type Normalised } from './connectors/index.js';
import { derivedUuid, isRandomizedMac, pseudonym, type Pseudonyms } from './pseudonyms.js';
import { checkTimestamp } from './timestamps.js';
import { oncePerKey, type Idempotent } from './idempotency.js';

export const MAX_EVENTS_PER_REQUEST = 1000;
/** Seconds a client should wait before retrying a batch Kafka did not take. */
const RETRY_AFTER_S = 5;

export interface IngestDeps {
  db: Db;
  publisher: Publisher;
  /** The events topic. */
  topic: string;
  /** Where each request's accepted/rejected counts go (connector health's rejection rate); none when absent. */
  reportsTopic?: string;
  pseudonyms: Pseudonyms;
  throughput: Throughput;
  log: Logger;
}

export interface IngestBatch {
  operator: Operator;
  venueId: string;
  connectorType: ConnectorType;
  /** Raw events as sent; each is validated on its own. */
  events: unknown[];
  /** The request's Idempotency-Key: events without an id of their own get ids derived from it and their position. */
  idempotencyKey?: string;
  /**
   * The request's body as sent (it names the venue, the connector and the events): with an
   * Idempotency-Key, a retry must repeat it byte for byte. Without it, the batch's fields stand for
   * the body. Hashing the text costs about a fifth of serialising the events again (~0.15 against
   * ~0.75 µs per event; benchmarks/README.md, "The idempotent body's hash").
   */
  asSent?: string;
  /** Set when the batch came through one of the service's vendor links: its report names the integration (connector health). */
  source?: { integrationId: string; link: SourceOutcome['link'] };
}

export interface IngestError {
  index: number;
  reason: string;
}

export interface IngestResult {
  accepted: number;
  rejected: number;
  errors: IngestError[];
}

interface Valid {
  index: number;
  type: EventType;
  ts: number;
  event: Normalised;
  zoneId: string | null;
  /** The event's own id (`event_id`, else the vendor's, e.g. Square's): re-deliveries share it. */
  eventId?: string;
}

/** An event's own id: printable ASCII, as vendors' ids are. */
const EVENT_ID = /^[\x21-\x7e]{1,128}$/;

/** The event envelope is closed (a typo such as `timestmap` must not pass unnoticed); unknown payload fields are dropped instead. */
const EVENT_KEYS = new Set(['type', 'timestamp', 'payload', 'event_id']);

/** Unknown envelope keys, quoted for a reason: at most 5, each cut to 64 characters, anything but printable ASCII escaped. */
function unknownKeys(raw: object): string | undefined {
  const found: string[] = [];
  for (const key in raw) if (!EVENT_KEYS.has(key)) found.push(key);
  if (found.length === 0) return undefined;
  const quote = (k: string) =>
    `'${k.slice(0, 64).replace(/[^\x20-\x26\x28-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}'`;
  const listed = found.slice(0, 5).map(quote).join(', ') + (found.length > 5 ? ` and ${found.length - 5} more` : '');
  return `unknown field${found.length > 1 ? 's' : ''} ${listed}: an event holds only type, timestamp, payload and event_id (connector fields go in payload)`;
}

/**
 * Validates a batch event by event, resolves zones, reserves the monthly quota, and publishes the
 * accepted events as canonical events keyed by venue in one acknowledged send. Resolves only after
 * Kafka acknowledged them all; if it cannot, nothing is reported accepted, the quota is given
 * back and the caller gets 503 with Retry-After (resending the batch is safe). With an
 * Idempotency-Key, a batch sent again gets its first answer (`replayed`) and is not published twice.
 */
export async function ingestBatch(deps: IngestDeps, batch: IngestBatch, now = new Date()): Promise<Idempotent<IngestResult>> {
  const { operator, venueId, connectorType, events, idempotencyKey } = batch;
  if (idempotencyKey === undefined) return { result: await ingestOnce(deps, batch, now), replayed: false };
  const body = batch.asSent ?? { venueId, connectorType, events };
  return oncePerKey(deps.db, deps.log, operator.id, idempotencyKey, body, () => ingestOnce(deps, batch, now));
}

async function ingestOnce(deps: IngestDeps, batch: IngestBatch, now: Date): Promise<IngestResult> {
  const { operator, venueId, connectorType } = batch;
  await ownedVenue(deps.db, operator.id, venueId);
  const limits = PLAN_LIMITS[operator.plan];

  const started = performance.now();
  const checked = checkEvents(batch.events, connectorType, now.getTime(), { days: limits.retentionDays, plan: limits.label });
  const checkMs = performance.now() - started;
  const { errors } = checked;
  let valid = await resolveZones(deps.db, venueId, checked.valid, errors);
  valid = await checkHeartbeatIntegrations(deps.db, venueId, connectorType, valid, errors);

  const reservation = await reserveIngestEvents(deps.db, operator, valid.length, now);
  if (reservation.dropped > 0) {
    // Free plan: the events past the monthly quota are the batch's last ones.
    const reason = `monthly ingest quota of ${limits.ingestEvents.toLocaleString('en-US')} events exceeded (${limits.label} plan)`;
    for (const v of valid.slice(reservation.granted)) errors.push({ index: v.index, reason });
    valid = valid.slice(0, reservation.granted);
  }

  const source = batch.source ? { source: { ...batch.source, ok: true } } : {};
  const reportOf = (accepted: number, rejected: number): IngestReport => ({
    operatorId: operator.id,
    venueId,
    connectorType,
    accepted,
    rejected,
    ts: now.getTime(),
    ...source,
  });
  const publishing = performance.now();
  if (valid.length > 0) {
    const ctx = {
      key: deps.pseudonyms.keyFor(operator.id),
      operatorId: operator.id,
      venueId,
      connectorType,
      receivedAt: now.getTime(),
      idempotencyKey: batch.idempotencyKey,
    };
    // The request's events in runs of about 32 KB (lib/events/wire.ts), all to the venue's partition, in order, in one acknowledged send.
    const messages: Message[] = encodeEventMessages(valid.map((v) => toCanonical(v, ctx))).map((m) => ({ key: venueId, ...m }));
    // The request's report for connector health travels in the same acknowledged send.
    const report = deps.reportsTopic
      ? [{ topic: deps.reportsTopic, messages: [reportMessage(reportOf(valid.length, errors.length))] }]
      : [];
    try {
      await deps.publisher.publish([{ topic: deps.topic, messages }, ...report]);
    } catch (err) {
      deps.log.warn({ err, events: valid.length }, 'ingest batch not acknowledged by Kafka');
      // The answer stays 503 even if the release fails: the client must resend either way.
      await releaseIngestEvents(deps.db, operator, reservation, now).catch((e: Error) =>
        deps.log.error({ err: e, granted: reservation.granted }, 'could not release the ingest quota reservation'),
      );
      throw unavailable(
        `the event stream did not acknowledge the batch; nothing was accepted, resend the whole batch after ${RETRY_AFTER_S} s`,
        RETRY_AFTER_S,
      );
    }
    await deps.throughput.record(valid.length);
  }
  // A vendor link's delivery reports even when it held nothing: it shows the link works.
  else if (deps.reportsTopic && (errors.length > 0 || batch.source))
    await publishReport(deps, deps.reportsTopic, reportOf(0, errors.length));
  deps.log.debug(
    { accepted: valid.length, rejected: errors.length, checkMs: round(checkMs), publishMs: round(performance.now() - publishing) },
    'ingest batch',
  );
  errors.sort((a, b) => a.index - b.index);
  return { accepted: valid.length, rejected: errors.length, errors };
}

/** Checks each event on its own (synchronously, no I/O): envelope, type, timestamp, payload. */
export function checkEvents(
  events: unknown[],
  connectorType: ConnectorType,
  now: number,
  retention: { days: number; plan: string },
): { valid: Valid[]; errors: IngestError[] } {
  const spec = CONNECTORS[connectorType];
  const accepts = Object.keys(spec).join(', ');
  const valid: Valid[] = [];
  const errors: IngestError[] = [];
  const vendorIds = new Map<string, number>();
  events.forEach((raw, index) => {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      errors.push({ index, reason: 'event must be an object with type, timestamp and payload' });
      return;
    }
    const problems: string[] = [];
    const { type, timestamp, payload = {}, event_id: ownId } = raw as Record<string, unknown>;
    const unknown = unknownKeys(raw);
    if (unknown) problems.push(unknown);
    if (ownId !== undefined && (typeof ownId !== 'string' || !EVENT_ID.test(ownId)))
      problems.push('event_id must be 1 to 128 printable ASCII characters');
    const eventSpec = typeof type === 'string' && Object.hasOwn(spec, type) ? spec[type as EventType] : undefined;
    if (!eventSpec) {
      problems.push(
        typeof type === 'string'
          ? `unknown event type '${type.slice(0, 64)}' for connector ${connectorType} (accepted: ${accepts})`
          : `type is required: one of ${accepts}`,
      );
    }
    const time = checkTimestamp(timestamp, now, retention);
    if ('reason' in time) problems.push(time.reason);
    let event: Normalised | undefined;
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) problems.push('payload must be an object');
    else if (eventSpec) {
      const parsed = eventSpec.payload.safeParse(payload);
      if (parsed.success) event = parsed.data;
      else problems.push(...parsed.error.issues.map(describeIssue));
    }
    const eventId = typeof ownId === 'string' ? ownId : event?.vendorId;
    if (eventId !== undefined) {
      const first = vendorIds.get(eventId);
      if (first !== undefined) problems.push(`duplicate of event ${first} (same ${typeof ownId === 'string' ? '' : 'vendor '}event id)`);
      else vendorIds.set(eventId, index);
    }
    if (problems.length > 0 || !event || !('ts' in time)) errors.push({ index, reason: problems.join('; ') });
    else valid.push({ index, type: type as EventType, ts: time.ts, event, zoneId: null, eventId });
  });
  return { valid, errors };
}

/** Best effort: a lost report only makes the rejection rate less precise, never loses an event. */
const reportMessage = (r: IngestReport): Message => ({ key: r.venueId, value: encodeIngestReport(r) });

/** A report on its own (a request that accepted nothing, a vendor link's outcome); best effort, as it changes no stored data. */
export async function publishReport(deps: Pick<IngestDeps, 'publisher' | 'log'>, topic: string, r: IngestReport): Promise<void> {
  try {
    await deps.publisher.publish([{ topic, messages: [reportMessage(r)] }]);
  } catch (err) {
    deps.log.warn({ err }, 'ingest report not published; connector health misses this request');
  }
}

/**
 * A heartbeat naming an integration counts for that integration's health: it must be an active
 * integration of this venue and of this connector type (never another operator's: a heartbeat must not vouch for a foreign integration).
 */
async function checkHeartbeatIntegrations(
  db: Db,
  venueId: string,
  connectorType: ConnectorType,
  valid: Valid[],
  errors: IngestError[],
): Promise<Valid[]> {
  const named = (v: Valid) => (v.type === 'heartbeat' ? v.event.payload.integration_id : undefined);
  if (!valid.some((v) => typeof named(v) === 'string')) return valid;
  const mine = new Set(
    (await liveIntegrationSummaries(db, venueId)).filter((i) => i.is_active && i.connector_type === connectorType).map((i) => i.id),
  );
  return valid.filter((v) => {
    const id = named(v);
    if (typeof id !== 'string' || mine.has(id)) return true;
    errors.push({ index: v.index, reason: `payload.integration_id '${id}' is not an active ${connectorType} integration of this venue` });
    return false;
  });
}

/** Zone references must name an active zone of this venue; the zones are loaded once, only if referenced. */
async function resolveZones(db: Db, venueId: string, valid: Valid[], errors: IngestError[]): Promise<Valid[]> {
  if (!valid.some((v) => v.event.zone)) return valid;
  const zones = await activeZones(db, venueId);
  const ids = new Set(zones.map((z) => z.id));
  const bySlug = new Map(zones.map((z) => [z.slug, z.id]));
  return valid.filter((v) => {
    const ref = v.event.zone;
    if (!ref) return true;
    const zoneId = 'id' in ref ? (ids.has(ref.id) ? ref.id : undefined) : bySlug.get(ref.slug);
    if (zoneId) v.zoneId = zoneId;
    else
      errors.push({
        index: v.index,
        reason: `payload.${'id' in ref ? `zone_id '${ref.id}'` : `zone '${ref.slug}'`} is not an active zone of this venue`,
      });
    return zoneId !== undefined;
  });
}

/** The canonical event: identifiers replaced by the operator's keyed pseudonyms before it leaves this function. */
export function toCanonical(
  v: Valid,
  ctx: {
    key: HmacSha256Key;
    operatorId: string;
    venueId: string;
    connectorType: ConnectorType;
    receivedAt: number;
    idempotencyKey?: string;
  },
): CanonicalEvent {
  const { device, metrics, payload, pseudonymise } = v.event;
  let devicePseudonym: string | null = null;
  let randomizedMac = false;
  if (device) {
    devicePseudonym = 'mac' in device ? pseudonym(ctx.key, device.mac) : pseudonym(ctx.key, `${device.field}:${device.hashed}`);
    randomizedMac = 'mac' in device && isRandomizedMac(device.mac);
    payload[device.field] = devicePseudonym;
  }
  for (const field of pseudonymise ?? []) {
    if (typeof payload[field] === 'string') payload[field] = pseudonym(ctx.key, `${field}:${payload[field]}`);
  }
  return {
    id: eventIdOf(v, ctx),
    operatorId: ctx.operatorId,
    venueId: ctx.venueId,
    zoneId: v.zoneId,
    connectorType: ctx.connectorType,
    type: v.type,
    ts: v.ts,
    receivedAt: ctx.receivedAt,
    device: devicePseudonym,
    randomizedMac,
    metrics,
    payload,
  };
}

/**
 * Random unless the event can be recognised when sent again: by its own id (`event_id`, or the
 * vendor's), or by its position in a request with an Idempotency-Key. Derived ids repeat on a
 * re-delivery, and the sink stores an id once (docs/events.md).
 */
function eventIdOf(v: Valid, ctx: { key: HmacSha256Key; venueId: string; connectorType: ConnectorType; idempotencyKey?: string }): string {
  if (v.eventId !== undefined) return derivedUuid(ctx.key, `${ctx.venueId}:${ctx.connectorType}:${v.eventId}`);
  if (ctx.idempotencyKey !== undefined)
    return derivedUuid(ctx.key, `${ctx.venueId}:${ctx.connectorType}:idempotency:${ctx.idempotencyKey}:${v.index}`);
  return randomUUID();
}

/**
 * `payload.rssi: expected number, received string`; a missing field reads `required`. Zod's
 * messages never echo input values (they may be MACs). Formatted only on failure: a per-parse
 * error map would slow every parse.
 */
function describeIssue(issue: z.core.$ZodIssue): string {
  const path = ['payload', ...issue.path.map(String)].join('.');
  if (issue.code === 'invalid_type' && issue.message.endsWith('received undefined')) return `${path}: required`;
  const message = issue.message.replace(/^Invalid input: /, '');
  return `${path}: ${message.charAt(0).toLowerCase()}${message.slice(1)}`;
}

const round = (ms: number) => Math.round(ms * 10) / 10;
