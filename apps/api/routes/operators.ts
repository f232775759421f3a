import Router from '@koa/router';
import { z } from 'zod';
import { createOperator, verifyAdminSecret } from '../../../domain/tenants/operators.js';
import { SELF_SERVICE_PLANS } from '../../../domain/tenants/plans.js';
import { parseInput } from '../../../lib/validate.js';
import type { ApiDeps } from '../app.js';

export const createOperatorBody = z.object({
  name: z.string().trim().min(1).max(200),
  email: z.email().max(320),
  plan: z.enum(SELF_SERVICE_PLANS).default('free'),
});

/** Admin endpoints, authenticated by X-Admin-Key instead of a bearer key. */
export function operatorRoutes(deps: ApiDeps): Router {
  const router = new Router();
  router.post('/api/operators', async (ctx) => {
    verifyAdminSecret(deps.services.cfg.ADMIN_SECRET, ctx.get('x-admin-key') || undefined);
    const input = parseInput(createOperatorBody, ctx.request.body ?? {}, 'body');
    ctx.status = 201;
    ctx.body = await createOperator(deps.services.db, input);
  });
  return router;
}
