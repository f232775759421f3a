import Router from '@koa/router';
import { z } from 'zod';
import { changePlan, createOperator, rotateKeyAsAdmin, verifyAdminSecret } from '../../../domain/tenants/operators.js';
import { PLANS, SELF_SERVICE_PLANS } from '../../../domain/tenants/plans.js';
import { nulFree, parseInput } from '../../../lib/validate.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';

const createOperatorBody = z.object({
  name: nulFree(z.string().trim().min(1).max(200)),
  email: z.email().max(320),
  plan: z.enum(SELF_SERVICE_PLANS).default('free'),
});
const operatorParams = z.object({ id: z.uuid() });
const setPlanBody = z.object({ plan: z.enum(PLANS) });

const createdOperator = z.object({
  operator_id: z.uuid(),
  api_key: z.string().describe('shown only in this response'),
  api_key_prefix: z.string(),
});
export const rotatedKey = z.object({
  operator_id: z.uuid(),
  api_key: z.string().describe('the new key, shown only in this response'),
  api_key_prefix: z.string(),
  rotated_at: z.iso.datetime().describe('when the previous key stopped working'),
});
const planChanged = z.object({ operator_id: z.uuid(), plan: z.enum(PLANS), plan_name: z.string() });

/** Admin endpoints, authenticated by X-Admin-Key instead of a bearer key; the secret is checked before the input. */
export function operatorRoutes(deps: ApiDeps): Router {
  const { db, cfg } = deps.services;
  const router = new Router();
  router.post('/api/operators', async (ctx) => {
    verifyAdminSecret(cfg.ADMIN_SECRET, ctx.get('x-admin-key') || undefined);
    const input = parseInput(createOperatorBody, ctx.request.body ?? {}, 'body');
    ctx.status = 201;
    ctx.body = await createOperator(db, input);
  });
  router.post('/api/operators/:id/rotate-key', async (ctx) => {
    verifyAdminSecret(cfg.ADMIN_SECRET, ctx.get('x-admin-key') || undefined);
    const { id } = parseInput(operatorParams, ctx.params, 'params');
    ctx.body = await rotateKeyAsAdmin(db, id);
  });
  router.put('/api/operators/:id/plan', async (ctx) => {
    verifyAdminSecret(cfg.ADMIN_SECRET, ctx.get('x-admin-key') || undefined);
    const { id } = parseInput(operatorParams, ctx.params, 'params');
    const { plan } = parseInput(setPlanBody, ctx.request.body ?? {}, 'body');
    ctx.body = await changePlan(db, id, plan);
  });
  return router;
}

export const docs: RouteDoc[] = [
  {
    method: 'post',
    path: '/api/operators',
    summary: 'Create an operator (tenant) and its first API key',
    tag: 'Operators',
    auth: 'admin',
    body: createOperatorBody,
    responses: { 201: { description: 'created; the key is returned only here', schema: createdOperator } },
    errors: [],
  },
  {
    method: 'post',
    path: '/api/operators/{id}/rotate-key',
    summary: "Replace an operator's API key (for a lost key); the old key stops working at once",
    tag: 'Operators',
    auth: 'admin',
    params: operatorParams,
    responses: { 200: { description: 'the new key, returned only here', schema: rotatedKey } },
    errors: [404],
  },
  {
    method: 'put',
    path: '/api/operators/{id}/plan',
    summary: "Change an operator's plan; the only way to Enterprise",
    tag: 'Operators',
    auth: 'admin',
    params: operatorParams,
    body: setPlanBody,
    responses: { 200: { description: 'the plan now in force', schema: planChanged } },
    errors: [404],
  },
];
