import type Router from '@koa/router';
import { z } from 'zod';
import { DASHBOARD_RANGES, dashboardEvents, dashboardStats, type DashboardRange } from '../../../domain/dashboard/dashboard.js';
import { parseInput } from '../../../lib/validate.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';
import { authedRouter } from './authed.js';

const RANGES = Object.keys(DASHBOARD_RANGES) as [DashboardRange, ...DashboardRange[]];

const dashboardEventsQuery = z.object({
  range: z.enum(RANGES).default('7d').describe('24h: 24 hourly buckets; 7d, 30d, 90d: daily buckets (UTC), each ending with the current one'),
});

const count = z.number().int();

export function dashboardRoutes(deps: ApiDeps): Router {
  const { db, ch } = deps.services;
  const router = authedRouter(deps);
  router.get('/api/dashboard/stats', async (ctx) => {
    ctx.body = await dashboardStats({ db, ch }, ctx.state.operator.id);
  });
  router.get('/api/dashboard/events', async (ctx) => {
    const { range } = parseInput(dashboardEventsQuery, ctx.query, 'query');
    ctx.body = await dashboardEvents(ch, ctx.state.operator.id, range);
  });
  return router;
}

export const docs: RouteDoc[] = [
  {
    method: 'get',
    path: '/api/dashboard/stats',
    summary: "The operator's active venues, events in the last 24 h, active integrations and average dwell (0 until visits exist)",
    tag: 'Dashboard',
    auth: 'bearer',
    responses: {
      200: {
        description: 'Summary over all the operator’s venues',
        schema: z.object({ venueCount: count, events24h: count, activeIntegrations: count, avgDwellSeconds: z.number() }),
      },
    },
    errors: [401, 429],
  },
  {
    method: 'get',
    path: '/api/dashboard/events',
    summary: 'Events, entries and exits across all the operator’s venues per UTC hour (24h) or day; empty buckets are zeros',
    tag: 'Dashboard',
    auth: 'bearer',
    query: dashboardEventsQuery,
    responses: {
      200: {
        description: 'Buckets oldest first, ts = bucket start (epoch ms)',
        schema: z.object({
          events: z.array(z.object({ ts: count, events: count, entries: count, exits: count })),
          range: z.enum(RANGES),
        }),
      },
    },
    errors: [400, 401, 429],
  },
];
