import Router from '@koa/router';
import { requireOperator } from '../middleware/auth.js';
import { limiterFor, rateLimit } from '../middleware/rate-limit.js';
import { meterApiCalls } from '../middleware/quota.js';
import type { ApiDeps } from '../deps.js';

/**
 * A router whose routes all need a bearer key, then pass the per-operator rate limit (unless
 * RATE_LIMITS_ENABLED is off) and the monthly API-call meter. Its middleware runs only when one of
 * its routes matches, so an unknown path is a 404 whether or not a key was sent.
 */
export function authedRouter(deps: ApiDeps): Router {
  const { db, redis, cfg } = deps.services;
  const router = new Router();
  router.use(requireOperator(db));
  if (cfg.RATE_LIMITS_ENABLED) router.use(rateLimit(limiterFor(redis)));
  router.use(meterApiCalls(db));
  return router;
}
