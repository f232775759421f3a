import { z } from 'zod';
import { DASHBOARD_RANGES, dashboardEvents, dashboardStats, type DashboardRange } from '../../../domain/dashboard/dashboard.js';
import { portfolio, portfolioOutput } from '../../../domain/dashboard/portfolio.js';
import { LONG_RANGES } from '../../../domain/limits/query-limits.js';
import { operation } from './operation.js';
import { count } from './schemas.js';

const RANGES = Object.keys(DASHBOARD_RANGES) as [DashboardRange, ...DashboardRange[]];

const dashboardEventsQuery = z.object({
  range: z
    .enum(RANGES)
    .default('7d')
    .describe('24h: 24 hourly buckets; 7d, 30d, 90d: daily buckets (UTC), each ending with the current one'),
});

export const dashboardOperations = [
  operation({
    id: 'getPortfolio',
    method: 'get',
    path: '/api/dashboard/portfolio',
    summary:
      "Every active venue with live occupancy against capacity, active alarms by severity, connector health, today's events and average dwell, most in need of attention first",
    tag: 'Dashboard',
    auth: 'bearer',
    cost: 'expensive',
    response: { status: 200, description: 'One entry per active venue; today is the venue-local day', schema: portfolioOutput },
    errors: [401, 429],
    tool: {
      name: 'get_portfolio',
      description:
        "The caller's venues at a glance, the ones needing attention first (most severe active alarm, then broken connectors, then the fullest): " +
        'per venue the people present now against its capacity (percent), active alarms per severity, integrations per health status (healthy, degraded, offline, waiting), ' +
        "and, for today in the venue's own time zone (local_day), the number of events and the mean dwell in seconds of finished visits.",
    },
    handler: (_input, { deps, operator }) => portfolio(deps.services, operator.id),
  }),
  operation({
    id: 'getDashboardStats',
    method: 'get',
    path: '/api/dashboard/stats',
    summary:
      "The operator's active venues, events in the last 24 h, active integrations, and the mean dwell (seconds) of visits started in the last 24 h",
    tag: 'Dashboard',
    auth: 'bearer',
    cost: 'expensive',
    response: {
      status: 200,
      description: 'Summary over all the operator’s venues',
      schema: z.object({ venueCount: count, events24h: count, activeIntegrations: count, avgDwellSeconds: z.number() }),
    },
    errors: [401, 429],
    tool: {
      name: 'get_dashboard_stats',
      description:
        "Summary over all the caller's venues: number of active venues, events received in the last 24 hours, active connector integrations, and the average visit dwell time in seconds.",
    },
    handler: (_input, { deps, operator }) => dashboardStats({ db: deps.services.db, ch: deps.services.ch }, operator.id),
  }),
  operation({
    id: 'getDashboardEvents',
    method: 'get',
    path: '/api/dashboard/events',
    summary: 'Events, entries and exits across all the operator’s venues per UTC hour (24h) or day; empty buckets are zeros',
    tag: 'Dashboard',
    auth: 'bearer',
    cost: 'expensive',
    large: (q) => LONG_RANGES.has(q.range),
    query: dashboardEventsQuery,
    response: {
      status: 200,
      description: 'Buckets oldest first, ts = bucket start (epoch ms)',
      schema: z.object({
        events: z.array(z.object({ ts: count, events: count, entries: count, exits: count })),
        range: z.enum(RANGES),
      }),
    },
    errors: [400, 401, 429],
    tool: {
      name: 'get_dashboard_events',
      description:
        "Event volume across all the caller's venues: per bucket the number of events, entries and exits. range 24h gives 24 hourly buckets; 7d, 30d, 90d give daily buckets (UTC days). ts is the bucket start in epoch ms.",
    },
    handler: ({ query }, { deps, operator }) => dashboardEvents(deps.services.ch, operator.id, query.range),
  }),
];
