import { createHash, timingSafeEqual } from 'node:crypto';
import { AppError, type FieldProblem } from '../../../lib/errors.js';
import { jsonDepth, MAX_JSON_DEPTH } from '../../../lib/validate.js';
import type { ConnectorType } from '../../../lib/events/vocabulary.js';

/**
 * What every vendor webhook receiver shares: the request as the domain sees it, the shape of a
 * receiver (verify, then map to the connector events `/ingest` takes), constant-time comparison
 * and the typed refusals. Pure: no I/O, no clock but the one given.
 */

/** A vendor's delivery, transport-free. Header names are lower case (as Node gives them). */
export interface WebhookRequest {
  method: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The body exactly as received (UTF-8 text): signatures are computed over it. */
  rawBody: string;
  /** Server time of receipt, epoch ms. */
  now: number;
}

/** One event as `/ingest` takes it (docs/events.md): validated later, by ingest, on its own. */
export interface ConnectorEvent {
  type: string;
  timestamp: unknown;
  payload: Record<string, unknown>;
  event_id?: string;
}

export interface Mapped {
  events: ConnectorEvent[];
  /** Parts of the delivery deliberately not turned into events (another location, an unknown webhook type, a duplicate…). */
  ignored: number;
  /** Why, for the debug log (never a value from the body). */
  ignoredWhy?: string;
}

export interface Receiver {
  connector: ConnectorType;
  /**
   * Meraki only: the plain-text answer to the vendor's `GET` (its validator). Receivers without
   * one answer GET with 405.
   */
  answerGet?(config: Record<string, unknown>): string;
  /**
   * Authenticates the delivery by the vendor's own mechanism; throws `refused` (401). `json`
   * parses the body (400 when it is not JSON) for vendors whose secret travels inside it.
   */
  verify(config: Record<string, unknown>, req: WebhookRequest, json: () => unknown): void;
  /** The vendor body → connector events; throws `invalid` (400) naming the field when it is not the vendor's format. */
  map(body: unknown, config: Record<string, unknown>, now: number): Mapped;
}

/** 401 UNAUTHORIZED: says which header or field, never its value or the secret. */
export const refused = (message: string) => new AppError(401, 'UNAUTHORIZED', message);

/** 400 VALIDATION_ERROR naming the field of the vendor body. */
export const invalid = (message: string, field: string, problem = message): AppError =>
  new AppError(400, 'VALIDATION_ERROR', message, [{ field, message: problem }] satisfies FieldProblem[]);

const sha256 = (value: string | Buffer) => createHash('sha256').update(value).digest();

/**
 * Constant-time equality of two strings of any length: compares their SHA-256 digests with
 * timingSafeEqual, so neither the content nor the length of the expected value leaks through time.
 */
export function safeEqual(given: string, expected: string): boolean {
  return timingSafeEqual(sha256(given), sha256(expected));
}

/** A header's single value (the first when repeated), or undefined. */
export function header(req: WebhookRequest, name: string): string | undefined {
  const value = req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A config string, or undefined when absent or empty. */
export const configString = (config: Record<string, unknown>, field: string): string | undefined => {
  const v = config[field];
  return typeof v === 'string' && v !== '' ? v : undefined;
};

/** An id ingest accepts as `event_id` (1 to 128 printable ASCII), else a SHA-256 of it: so any vendor id dedupes. */
export function eventIdFrom(prefix: string, parts: Array<string | number | undefined | null>): string {
  return `${prefix}:${createHash('sha256')
    .update(parts.map((p) => String(p ?? '')).join('|'))
    .digest('hex')
    .slice(0, 40)}`;
}

/** A vendor id used as is when ingest takes it as an `event_id`, else hashed (still stable across re-deliveries). */
export function vendorEventId(prefix: string, id: string): string {
  return /^[\x21-\x7e]{1,128}$/.test(id) ? id : eventIdFrom(prefix, [id]);
}

/** Vendor epoch seconds (integer or fraction) → ISO 8601; undefined when not a finite number. */
export function isoFromEpochSeconds(s: unknown): string | undefined {
  if (typeof s !== 'number' || !Number.isFinite(s)) return undefined;
  const d = new Date(Math.round(s * 1000));
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

export const sha256Hex = (value: string) => sha256(value).toString('hex');

/** The body as JSON: 400 for another content type, an empty body, too deep nesting or malformed JSON. */
export function parseJsonBody(req: WebhookRequest): unknown {
  const type = (header(req, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json' && !/^application\/[\w.-]+\+json$/.test(type)) {
    throw invalid(
      'the webhook body must be JSON with Content-Type: application/json',
      'body',
      `unsupported content type ${type.slice(0, 100) || '(none)'}`,
    );
  }
  if (req.rawBody.trim() === '') throw invalid('the webhook body is empty', 'body', 'required');
  if (jsonDepth(req.rawBody) > MAX_JSON_DEPTH)
    throw invalid(`the webhook body is nested deeper than ${MAX_JSON_DEPTH} levels`, 'body', `nesting depth over ${MAX_JSON_DEPTH}`);
  try {
    return JSON.parse(req.rawBody);
  } catch (err) {
    throw invalid('the webhook body is not valid JSON', 'body', (err as Error).message.slice(0, 200));
  }
}
