import { z } from 'zod';
import { TELEMETRY_KEYS, type TelemetryKey } from '../../lib/events/vocabulary.js';

/**
 * The /ws wire protocol (docs/websocket.md): close codes, command parsing and message shapes.
 * Pure: no sockets, no engines.
 */

/**
 * Close codes, after the Pusher/Soketi convention: 4000–4099 do not reconnect, 4100–4199 reconnect
 * after a backoff. The reason is always `<CODE>: <message>` with CODE from the spec's error codes.
 */
export const CLOSE = {
  /** Missing, unknown or rotated key; also a live connection whose key was rotated. */
  UNAUTHORIZED: 4001,
  /** The edge could not check the key (Postgres unreachable); retry after a backoff. */
  SERVICE_UNAVAILABLE: 4103,
  /** The client read too slowly: more than WS_MAX_BUFFERED_BYTES of pushes were waiting. */
  SLOW_CONSUMER: 4108,
  /** The operator already has its maximum of concurrent connections. */
  RATE_LIMITED: 4129,
  /** Server shutting down: reconnect now (another instance takes it). */
  GOING_AWAY: 1001,
} as const;

/** Close reasons are limited to 123 bytes by the protocol. */
export function closeReason(code: string, message: string): string {
  const text = `${code}: ${message}`;
  return Buffer.byteLength(text) <= 123
    ? text
    : Buffer.from(text)
        .subarray(0, 123)
        .toString('utf8')
        .replace(/\uFFFD$/, '');
}

/** `errorCode` values of a command reply; the spec's codes plus two of the stream's own. */
export type CommandErrorCode =
  'VALIDATION_ERROR' | 'NOT_FOUND' | 'FORBIDDEN' | 'RATE_LIMITED' | 'SUBSCRIPTION_LIMIT' | 'SERVICE_UNAVAILABLE';

export interface CommandError {
  cmdId: number | null;
  errorCode: CommandErrorCode;
  errorMsg: string;
}

/** Entries per command array in one message. */
export const MAX_COMMANDS_PER_MESSAGE = 100;

export type Command =
  | { kind: 'subscribe'; cmdId: number; venueId: string; keys: TelemetryKey[] }
  | { kind: 'unsubscribe'; cmdId: number; venueId: string | null }
  | { kind: 'unsubscribeVenue'; cmdId: number | null; venueId: string };

export interface ParsedMessage {
  commands: Command[];
  errors: CommandError[];
}

const cmdIdSchema = z
  .number()
  .int()
  .min(0)
  .max(2 ** 31 - 1);
const uuid = z.uuid();
const keysSchema = z.array(z.enum(TELEMETRY_KEYS)).min(1).max(32);
const KNOWN = new Set(['tsSubCmds', 'tsUnsubCmds']);

const bad = (cmdId: number | null, errorMsg: string): CommandError => ({ cmdId, errorCode: 'VALIDATION_ERROR', errorMsg });
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parses one client message into commands, in order. Each command array entry stands alone: a bad
 * entry gets its own error and the others still run.
 */
export function parseMessage(text: string): ParsedMessage {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { commands: [], errors: [bad(null, 'malformed JSON: send {"tsSubCmds":[...]} or {"tsUnsubCmds":[...]}')] };
  }
  if (!isObject(body)) return { commands: [], errors: [bad(null, 'a message must be a JSON object with tsSubCmds and/or tsUnsubCmds')] };
  const unknown = Object.keys(body).filter((k) => !KNOWN.has(k));
  if (unknown.length > 0) {
    return {
      commands: [],
      errors: [
        bad(
          null,
          `unsupported field ${unknown
            .slice(0, 3)
            .map((k) => `'${k.slice(0, 40)}'`)
            .join(', ')}: only tsSubCmds and tsUnsubCmds`,
        ),
      ],
    };
  }
  if (body.tsSubCmds === undefined && body.tsUnsubCmds === undefined) {
    return { commands: [], errors: [bad(null, 'a message must carry tsSubCmds and/or tsUnsubCmds')] };
  }
  const out: ParsedMessage = { commands: [], errors: [] };
  for (const field of ['tsSubCmds', 'tsUnsubCmds'] as const) {
    const list = body[field];
    if (list === undefined) continue;
    if (!Array.isArray(list)) {
      out.errors.push(bad(null, `${field} must be an array`));
      continue;
    }
    if (list.length > MAX_COMMANDS_PER_MESSAGE) {
      out.errors.push(bad(null, `${field} holds ${list.length} entries; at most ${MAX_COMMANDS_PER_MESSAGE} per message`));
      continue;
    }
    for (const entry of list) {
      const parsed = field === 'tsSubCmds' ? parseSub(entry) : parseUnsub(entry);
      if ('errorCode' in parsed) out.errors.push(parsed);
      else out.commands.push(parsed);
    }
  }
  return out;
}

function parseSub(entry: unknown): Command | CommandError {
  if (!isObject(entry)) return bad(null, 'each tsSubCmds entry must be an object {cmdId, entityId, keys}');
  const cmdId = cmdIdSchema.safeParse(entry.cmdId);
  if (!cmdId.success) return bad(null, 'cmdId must be an integer from 0 to 2147483647');
  const id = cmdId.data;
  if (entry.unsubscribe !== undefined) {
    if (entry.unsubscribe !== true) return bad(id, 'unsubscribe, when given, must be true');
    if (entry.entityId === undefined || entry.entityId === null) return { kind: 'unsubscribe', cmdId: id, venueId: null };
    const venue = uuid.safeParse(entry.entityId);
    if (!venue.success) return bad(id, 'entityId must be a venue id (uuid)');
    return { kind: 'unsubscribe', cmdId: id, venueId: venue.data };
  }
  const venue = uuid.safeParse(entry.entityId);
  if (!venue.success) return bad(id, 'entityId must be a venue id (uuid)');
  const keys = keysSchema.safeParse(entry.keys);
  if (!keys.success) return bad(id, `keys must be a non-empty array of telemetry keys: ${TELEMETRY_KEYS.join(', ')}`);
  return { kind: 'subscribe', cmdId: id, venueId: venue.data, keys: [...new Set(keys.data)] };
}

function parseUnsub(entry: unknown): Command | CommandError {
  if (!isObject(entry)) return bad(null, 'each tsUnsubCmds entry must be an object {entityId}');
  let cmdId: number | null = null;
  if (entry.cmdId !== undefined) {
    const parsed = cmdIdSchema.safeParse(entry.cmdId);
    if (!parsed.success) return bad(null, 'cmdId, when given, must be an integer from 0 to 2147483647');
    cmdId = parsed.data;
  }
  const venue = uuid.safeParse(entry.entityId);
  if (!venue.success) return bad(cmdId, 'entityId must be a venue id (uuid)');
  return { kind: 'unsubscribeVenue', cmdId, venueId: venue.data };
}

/** The push's metrics restricted to the subscribed keys; null when none of them is present. */
export function pickMetrics(metrics: Partial<Record<string, number>>, keys: readonly string[]): Record<string, number> | null {
  let out: Record<string, number> | null = null;
  for (const k of keys) {
    const v = metrics[k];
    if (typeof v === 'number') (out ??= {})[k] = v;
  }
  return out;
}
