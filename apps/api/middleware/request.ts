import { randomUUID } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import type { Context, Next } from 'koa';
import type { Logger } from '../../../lib/logger.js';

/** `::ffff:127.0.0.1` (a dual-stack socket) is `127.0.0.1`, so one client has one budget. */
function plainAddress(addr: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(addr);
  return mapped ? mapped[1]! : addr;
}

/** A matcher for TRUSTED_PROXIES entries (addresses and CIDR blocks, already validated by config). */
export function trustedPeers(entries: readonly string[]): (addr: string) => boolean {
  const list = new BlockList();
  for (const entry of entries) {
    const [addr, bits] = entry.split('/') as [string, string | undefined];
    const type = isIP(addr) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(addr, type);
    else list.addSubnet(addr, Number(bits), type);
  }
  return (addr) => {
    const plain = plainAddress(addr);
    const family = isIP(plain);
    return family !== 0 && list.check(plain, family === 6 ? 'ipv6' : 'ipv4');
  };
}

/**
 * Sets `ctx.ip`, the address per-address budgets count: the socket's peer, unless that peer is a
 * trusted proxy (the front door), whose X-Forwarded-For ends with the address it saw. Earlier
 * entries are the client's own to forge, so only the last one is used, and only one hop.
 */
export function clientAddress(isTrusted: (addr: string) => boolean) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const peer = plainAddress(ctx.req.socket.remoteAddress ?? '');
    let client = peer;
    if (isTrusted(peer)) {
      const forwarded = plainAddress(ctx.get('x-forwarded-for').split(',').pop()?.trim() ?? '');
      if (isIP(forwarded)) client = forwarded;
    }
    ctx.request.ip = client;
    await next();
  };
}

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
      // path and query are masked by the logger's serializers (a key in a URL, lib/logger.ts).
      ctx.state.log.info(
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
