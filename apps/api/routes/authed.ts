import Router from '@koa/router';
import { requireOperator } from '../middleware/auth.js';
import type { ApiDeps } from '../app.js';

/**
 * A router whose routes all need a bearer key. Its middleware runs only when one of its routes
 * matches, so an unknown path is a 404 whether or not a key was sent.
 */
export function authedRouter(deps: ApiDeps): Router {
  const router = new Router();
  router.use(requireOperator(deps.services.db));
  return router;
}
