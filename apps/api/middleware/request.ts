import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import type { Logger } from '../../../lib/logger.js';

/** A request id (client's X-Request-Id when sane, else new), a child logger and one access line. */
export function requestContext(log: Logger) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const given = ctx.get('x-request-id');
    const id = /^[\w.-]{1,64}$/.test(given) ? given : randomUUID();
    ctx.state.requestId = id;
    ctx.state.log = log.child({ reqId: id });
    ctx.set('X-Request-Id', id);
    const started = performance.now();
    try {
      await next();
    } finally {
      ctx.state.log.info(
        { method: ctx.method, path: ctx.path, status: ctx.respond === false ? ctx.res.statusCode : ctx.status, ms: Math.round(performance.now() - started) },
        'request',
      );
    }
  };
}
