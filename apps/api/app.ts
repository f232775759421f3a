import Koa from 'koa';
import './types.js';
import type { ApiDeps } from './deps.js';
import { errorEnvelope } from './middleware/errors.js';
import { requestContext } from './middleware/request.js';
import { requestMetrics } from './metrics.js';
import { operationsRouter } from './http/router.js';
import { OPERATIONS } from './operations/index.js';
import { mountMcp } from './mcp/transport.js';
import { limiterFor } from './middleware/rate-limit.js';

export function createApp(deps: ApiDeps): Koa {
  // Behind the front door: the client address is the last X-Forwarded-For entry, the one our proxy
  // added (earlier entries are the client's to forge).
  const app = new Koa({ proxy: true, maxIpsCount: 1 });
  app.silent = true;
  app.use(requestMetrics(deps.metrics));
  app.use(requestContext(deps.services.log));
  app.use(errorEnvelope);
  const limiter = deps.services.cfg.RATE_LIMITS_ENABLED ? limiterFor(deps.services.redis, deps.services.cfg) : undefined;
  const router = operationsRouter(deps, OPERATIONS, limiter);
  mountMcp(router, deps, OPERATIONS, limiter);
  app.use(router.routes());
  app.use(router.allowedMethods({ throw: true }));
  return app;
}
