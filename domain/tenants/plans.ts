import type { Plan } from '../../lib/plans.js';

export { PLANS, SELF_SERVICE_PLANS, type Plan } from '../../lib/plans.js';

/** What each plan allows (spec: Limits, monthly quotas). */
export interface PlanLimits {
  label: 'Free' | 'Team' | 'Business' | 'Enterprise';
  ingestEvents: number;
  apiCalls: number;
  mcpQueries: number;
  maxVenues: number;
  retentionDays: number;
}

export const PLAN_LIMITS: Record<Plan, PlanLimits> = {
  free: { label: 'Free', ingestEvents: 10_000, apiCalls: 500, mcpQueries: 100, maxVenues: 1, retentionDays: 7 },
  starter: { label: 'Team', ingestEvents: 100_000, apiCalls: 10_000, mcpQueries: 1_000, maxVenues: 5, retentionDays: 90 },
  pro: { label: 'Business', ingestEvents: 1_000_000, apiCalls: 100_000, mcpQueries: 10_000, maxVenues: Infinity, retentionDays: 365 },
  enterprise: {
    label: 'Enterprise',
    ingestEvents: Infinity,
    apiCalls: Infinity,
    mcpQueries: Infinity,
    maxVenues: Infinity,
    retentionDays: 5 * 365,
  },
};
