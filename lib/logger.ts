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

/** Every logged URL part goes through maskApiKeys, as does an error's message and stack (which may quote one). */
const serializers = {
  path: maskString,
  url: maskString,
  query: maskString,
  err: (err: unknown): unknown => {
    const out = pino.stdSerializers.err(err as Error) as unknown;
    if (typeof out !== 'object' || out === null) return out;
    const o = out as { message?: unknown; stack?: unknown };
    return { ...o, message: maskString(o.message), stack: maskString(o.stack) };
  },
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
