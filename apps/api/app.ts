import Koa from 'koa';
import './types.js';
import type { ApiDeps } from './deps.js';
import { errorEnvelope } from './middleware/errors.js';
import { clientAddress, requestContext, trustedPeers } from './middleware/request.js';
import { requestMetrics } from './metrics.js';
import { operationsRouter } from './http/router.js';
import { OPERATIONS } from './operations/index.js';
import { mountMcp } from './mcp/transport.js';
import { limiterFor } from './middleware/rate-limit.js';
import { hooksRouter } from './http/hooks.js';

export function createApp(deps: ApiDeps): Koa {
  // No `proxy`: koa would believe X-Forwarded-* from any peer. clientAddress believes only the
  // front door's (TRUSTED_PROXIES), for ctx.ip and so the per-address budgets.
  const app = new Koa();
  app.silent = true;
  app.use(requestMetrics(deps.metrics));
  app.use(clientAddress(trustedPeers(deps.services.cfg.TRUSTED_PROXIES)));
  app.use(requestContext(deps.services.log, deps.services.cfg.ACCESS_LOG_LEVEL));
  app.use(errorEnvelope);
  const limiter = deps.services.cfg.RATE_LIMITS_ENABLED ? limiterFor(deps.services.redis, deps.services.cfg) : undefined;
  const router = operationsRouter(deps, OPERATIONS, limiter);
  mountMcp(router, deps, OPERATIONS, limiter);
  app.use(router.routes());
  app.use(router.allowedMethods({ throw: true }));
  const hooks = hooksRouter(deps, limiter);
  app.use(hooks.routes());
  app.use(hooks.allowedMethods({ throw: true }));
  return app;
}
