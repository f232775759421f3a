import Router from '@koa/router';
import { openApiDocument } from '../openapi.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';

/** Public, like /health: never authenticated, never rate limited. */
export function openapiRoutes(deps: ApiDeps): Router {
  const router = new Router();
  router.get('/openapi.json', (ctx) => {
    ctx.body = openApiDocument(deps.services.cfg.PUBLIC_URL);
  });
  return router;
}

export const docs: RouteDoc[] = [
  {
    method: 'get',
    path: '/openapi.json',
    summary: 'This OpenAPI 3.1 document',
    tag: 'System',
    auth: 'public',
    responses: { 200: { description: 'the OpenAPI document' } },
    errors: [],
  },
];
