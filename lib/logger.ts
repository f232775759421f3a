import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * Keys whose values never reach a log line: at the top of a logged object or up to two levels down
 * (`err.cause.config`), as the paths below spell out. Every connector secret field is listed (a test
 * checks it against CONNECTORS).
 */
const REDACTED_KEYS = [
  'authorization',
  'api_key',
  'apiKey',
  'password',
  'secret',
  'webhook_secret',
  'client_secret',
  'streaming_key',
  'app_secret',
  'access_token',
  'webhook_signature_key',
  'api_token',
  'webhook_header_value',
  'token',
  'x-admin-key',
  'config',
  'clientMac',
  'mac',
  'sta_eth_mac',
  'hashed_sta_eth_mac',
];

const redactPaths = REDACTED_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `req.headers["${k}"]`]);

/**
 * An API key's prefix (domain/tenants/api-keys.ts; lib cannot import domain, a test checks they
 * agree) and whatever key characters follow it, `_` also percent-encoded, any letter case.
 */
const KEY_IN_TEXT = /(vt(?:_|%5f)live(?:_|%5f))[^\s/?&#;,='"]+/gi;
const MASK = '…[REDACTED]';
/** A key's 28 random characters without the prefix: a mistyped key is still nearly the secret. */
const BARE_KEY = /(^|[^A-Za-z0-9_])[A-Za-z0-9]{28}(?![A-Za-z0-9])/g;

/**
 * Masks anything that looks like an API key in a path, query or message (a key sent in a URL is
 * refused, but it is still a key): `vt_live_…[REDACTED]`, the prefix kept to say what was there;
 * 28 letters and digits on their own as `[REDACTED]`.
 * A prefix still visible after percent-decoding (`v%74_live_`) masks the whole text.
 */
export function maskApiKeys(text: string): string {
  const masked = text.replace(KEY_IN_TEXT, `$1${MASK}`).replace(BARE_KEY, '$1[REDACTED]');
  if (!masked.includes('%')) return masked;
  let decoded = masked;
  try {
    decoded = decodeURIComponent(masked);
  } catch {
    decoded = masked.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
  return /vt_live_(?!…\[REDACTED\])/i.test(decoded) ? '[REDACTED]' : masked;
}

const maskString = (value: unknown): unknown => (typeof value === 'string' ? maskApiKeys(value) : value);

/**
 * The one form errors are logged in: `log.warn({ err }, '…')`. Kept: message, stack, `type` (the
 * class), every own field (`name`, `code`, kafkajs's `retriable`, `type`, `broker`, …) and
 * error-valued fields (`cause`, `originalError`) as errors of their own; messages and stacks
 * masked (they may quote a key). A string is masked too; anything else is logged as it is.
 */
export function serializeError(err: unknown): unknown {
  return masked(pino.stdSerializers.errWithCause(err as Error) as unknown);
}

function masked(node: unknown): unknown {
  if (typeof node === 'string') return maskApiKeys(node);
  if (Array.isArray(node)) return node.map(masked);
  if (!isSerializedError(node)) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node as object)) out[k] = k === 'message' || k === 'stack' ? maskString(v) : masked(v);
  return out;
}

/** What errWithCause made of a nested error (it carries the `raw` error, not enumerable). */
const isSerializedError = (v: unknown): boolean => typeof v === 'object' && v !== null && 'raw' in v && 'stack' in v;

/** Every logged URL part goes through maskApiKeys, as does an error's message and stack (which may quote one). */
const serializers = {
  path: maskString,
  url: maskString,
  query: maskString,
  err: serializeError,
};

/** `destination` defaults to stdout; tests pass their own stream to inspect what gets logged. */
export function createLogger(name: string, level = 'info', destination?: DestinationStream): Logger {
  const options = {
    name,
    level,
    redact: { paths: redactPaths, censor: '[redacted]' },
    serializers,
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
