import type { Logger } from '../../lib/logger.js';

declare module 'koa' {
  interface Request {
    body?: unknown;
  }
  interface DefaultState {
    requestId: string;
    log: Logger;
  }
}
