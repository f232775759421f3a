import { pino, type Logger } from 'pino';

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
];

const redactPaths = REDACTED_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `req.headers["${k}"]`]);

export function createLogger(name: string, level = 'info'): Logger {
  return pino({
    name,
    level,
    redact: { paths: redactPaths, censor: '[redacted]' },
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}

export type { Logger };
