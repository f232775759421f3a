import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import type { Logger } from '../../../lib/logger.js';
import { resolveClientAddress } from '../../../lib/client-address.js';

// Shared with the edge (apps/edge must not depend on apps/api).
export { trustedPeers } from '../../../lib/client-address.js';

/** Sets `ctx.ip`, the address per-address budgets count (lib/client-address.ts has the rule). */
export function clientAddress(isTrusted: (addr: string) => boolean) {
  return async (ctx: Context, next: Next): Promise<void> => {
    ctx.request.ip = resolveClientAddress(isTrusted, ctx.req.socket.remoteAddress ?? '', ctx.get('x-forwarded-for'));
    await next();
  };
}

/** A request id (client's X-Request-Id when sane, else new), a child logger and one access line at `level`. */
export function requestContext(log: Logger, level: 'info' | 'debug') {
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
      // path and query are masked by the logger's serializers (a key in a URL, lib/logger.ts).
      ctx.state.log[level](
        {
          method: ctx.method,
          path: ctx.path,
          ...(ctx.querystring ? { query: ctx.querystring } : {}),
          status: ctx.respond === false ? ctx.res.statusCode : ctx.status,
          ms: Math.round(performance.now() - started),
        },
        'request',
      );
    }
  };
}
