import Router from '@koa/router';
import { z } from 'zod';
import { getHealth, toStatus } from '../../../domain/system/health.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';

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

const member = z.object({ connected: z.boolean(), latencyMs: z.number(), error: z.string().optional() });
const health = z.object({
  status: z.enum(['healthy', 'degraded', 'unhealthy']),
  db: member,
  redis: member.extend({
    mode: z.enum(['shared', 'local-fallback']).describe('local-fallback: Redis unreachable, rate limits counted per instance'),
  }),
  kafka: member,
  clickhouse: member,
  stats: z.object({
    lastEventAt: z.iso.datetime().nullable(),
    operatorCount: z.number().int(),
    venueCount: z.number().int(),
    eventsPerMin: z.number(),
  }),
  uptime: z.number().int().describe('seconds since this instance started'),
});
const status = z.object({
  status: z.enum(['operational', 'degraded', 'outage']),
  eventsPerMin: z.number(),
  venueCount: z.number().int(),
  uptime: z.number().int(),
  checkedAt: z.iso.datetime(),
});

export const docs: RouteDoc[] = [
  {
    method: 'get',
    path: '/health',
    summary: 'Health of this instance and every engine it uses',
    tag: 'System',
    auth: 'public',
    // 503 carries the health document itself (not the error envelope), for load balancers.
    responses: {
      200: { description: 'healthy, or degraded while an engine other than Postgres is away', schema: health },
      503: { description: 'unhealthy: Postgres unreachable', schema: health },
    },
    errors: [],
  },
  {
    method: 'get',
    path: '/api/status',
    summary: 'Public service status, without infrastructure internals',
    tag: 'System',
    auth: 'public',
    responses: { 200: { description: 'current status', schema: status } },
    errors: [],
  },
];
