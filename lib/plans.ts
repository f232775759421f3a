/**
 * Plan identifiers as stored on the operator row. The operator-creation enum (`free|starter|pro`)
 * maps onto the spec's quota table (Free/Team/Business); Enterprise is assigned by an
 * administrator only (`enterprise`). What each plan allows: domain/tenants/plans.ts.
 */
export const PLANS = ['free', 'starter', 'pro', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];
export const SELF_SERVICE_PLANS = ['free', 'starter', 'pro'] as const;
