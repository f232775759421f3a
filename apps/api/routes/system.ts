import Router from '@koa/router';
import { getHealth, toStatus } from '../../../domain/system/health.js';
import type { ApiDeps } from '../app.js';

/** Public endpoints: never authenticated, never rate limited. */
export function systemRoutes(deps: ApiDeps): Router {
  const router = new Router();
  router.get('/health', async (ctx) => {
    const health = await getHealth(deps.services, deps.throughput);
    ctx.status = health.status === 'unhealthy' ? 503 : 200;
    ctx.body = health;
  });
  router.get('/api/status', async (ctx) => {
    ctx.body = toStatus(await getHealth(deps.services, deps.throughput));
  });
  return router;
}
