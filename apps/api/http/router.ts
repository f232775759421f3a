import Router from '@koa/router';
import type { Context } from 'koa';
import { countUsage } from '../../../domain/limits/quotas.js';
import type { RateLimiter } from '../../../domain/limits/rate-limit.js';
import { JsonStream } from '../../../lib/json-stream.js';
import { parseInput } from '../../../lib/validate.js';
import type { ApiDeps } from '../deps.js';
import { adminAuth, limitingFailures } from '../middleware/auth.js';
import { bearerCaller } from '../middleware/bearer.js';
import { readJsonBodyText } from '../middleware/body.js';
import { invoke } from '../operations/invoke.js';
import { koaPath, meteringOf, Reply, type AnyOperation, type BearerContext, type OperationContext } from '../operations/operation.js';

/**
 * The koa routes, generated from the operation declarations. Per request, in this order and each
 * step only once the one before passed: route match (an unknown path is a 404 before anything is
 * read), authentication, the rate limit, the monthly quota meter, reading the body, validating
 * params / query / body with the declared schemas, the domain call, the declared status.
 */
/** Aborts when the response closes: a client gone while its read waits for a turn gives the turn up. */
function closedSignal(ctx: Context): AbortSignal {
  const gone = new AbortController();
  ctx.res.once('close', () => gone.abort());
  return gone.signal;
}

export function operationsRouter(deps: ApiDeps, operations: readonly AnyOperation[], limiter: RateLimiter | undefined): Router {
  const { cfg, db } = deps.services;
  const router = new Router();

  for (const op of operations) {
    const metering = meteringOf(op);
    router[op.method](koaPath(op.path), async (ctx: Context) => {
      let context: OperationContext | BearerContext = { deps, log: ctx.state.log, operations };
      if (op.auth === 'admin') await limitingFailures(limiter, ctx, () => adminAuth(cfg.ADMIN_SECRET, ctx));
      if (op.auth === 'bearer' && metering) {
        const { operator, apiKey, count } = await bearerCaller(db, limiter, ctx, metering.rate);
        context = { deps, log: ctx.state.log, operations, operator, apiKey };
        await count();
        if (metering.quota !== 'none') await countUsage(db, operator, metering.quota);
      }
      const read = op.body ? await readJsonBodyText(ctx, { checkedPerItem: op.checkedPerItem }) : undefined;
      const input = {
        params: op.params ? parseInput(op.params, ctx.params, 'params') : undefined,
        query: op.query ? parseInput(op.query, ctx.query, 'query') : undefined,
        body: op.body ? parseInput(op.body, read?.body ?? {}, 'body') : undefined,
        headers: op.headers ? parseInput(op.headers, ctx.headers, 'headers') : {},
        bodyText: read?.text,
      };
      const result = await invoke(op, input, context, op.cost === 'expensive' ? closedSignal(ctx) : undefined);
      const reply = result instanceof Reply ? result : new Reply(op.response.status, result);
      ctx.status = reply.status;
      ctx.set(reply.headers);
      if (reply.body instanceof JsonStream) {
        ctx.type = 'application/json';
        // The status is sent already when a stream fails; koa then cuts the response off.
        reply.body.stream.once('error', (err) => ctx.state.log.error({ err }, 'response stream failed'));
        ctx.body = reply.body.stream;
      } else ctx.body = reply.body;
    });
  }
  return router;
}
