import { pino, type DestinationStream, type Logger } from 'pino';

/** Keys whose values never reach a log line, wherever they sit in a logged object. */
export const REDACTED_KEYS = [
  'authorization',
  'api_key',
  'apiKey',
  'password',
  'secret',
  'webhook_secret',
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
