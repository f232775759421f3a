import type Router from '@koa/router';
import { z } from 'zod';
import { usageReport } from '../../../domain/limits/quotas.js';
import { PLANS } from '../../../domain/tenants/plans.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';
import { authedRouter } from './authed.js';

const counter = z.object({
  used: z.number().int(),
  quota: z.number().int().nullable().describe('null: unlimited'),
  remaining: z.number().int().nullable(),
  overage: z.number().int().describe('usage past the quota, billed on Team and Business'),
  overQuota: z.enum(['refused', 'dropped', 'billed', 'unlimited']).describe('what happens past the quota on this plan'),
});
const usageBody = z.object({
  plan: z.enum(PLANS),
  planName: z.string(),
  periodStart: z.iso.datetime(),
  resetsAt: z.iso.datetime(),
  apiCalls: counter,
  mcpQueries: counter,
  ingestEvents: counter.extend({ dropped: z.number().int().describe('events refused over quota (Free)') }),
  maxVenues: z.number().int().nullable(),
  retentionDays: z.number().int(),
});

export function usageRoutes(deps: ApiDeps): Router {
  const router = authedRouter(deps);
  router.get('/api/usage', async (ctx) => {
    ctx.body = await usageReport(deps.services.db, ctx.state.operator);
  });
  return router;
}

export const docs: RouteDoc[] = [
  {
    method: 'get',
    path: '/api/usage',
    summary: "The current billing month's usage against the plan's quotas (not itself counted, and served over quota)",
    tag: 'Usage',
    auth: 'bearer',
    responses: { 200: { description: 'counters, quotas and reset time', schema: usageBody } },
    errors: [],
  },
];
