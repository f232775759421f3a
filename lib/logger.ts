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

/** `destination` defaults to stdout; tests pass their own stream to inspect what gets logged. */
export function createLogger(name: string, level = 'info', destination?: DestinationStream): Logger {
  const options = {
    name,
    level,
    redact: { paths: redactPaths, censor: '[redacted]' },
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
