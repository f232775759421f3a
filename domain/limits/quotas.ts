import type { Db } from '../../postgres/client.js';
import { addUsage, releaseIngest, reserveIngest, usageFor, type UsageCounter } from '../../postgres/queries/usage.js';
import { AppError } from '../../lib/errors.js';
import type { Operator } from '../tenants/operators.js';
import { PLAN_LIMITS, type Plan } from '../tenants/plans.js';

export interface BillingPeriod {
  start: Date;
  /** The next period's start: when the counters reset. */
  end: Date;
}

/** The billing month containing `now`: from the anchor plus a whole number of months, to one month later. */
export function billingPeriod(anchor: Date, now: Date = new Date()): BillingPeriod {
  const at = (m: number) => {
    const d = new Date(anchor);
    d.setUTCDate(1);
    d.setUTCMonth(anchor.getUTCMonth() + m);
    // A 31st anchor falls on the last day of shorter months (and back on the 31st after them).
    const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
    d.setUTCDate(Math.min(anchor.getUTCDate(), last));
    return d;
  };
  let months = Math.max(0, (now.getUTCFullYear() - anchor.getUTCFullYear()) * 12 + (now.getUTCMonth() - anchor.getUTCMonth()));
  while (months > 0 && at(months) > now) months--;
  return { start: at(months), end: at(months + 1) };
}

export const billingPeriodStart = (anchor: Date, now: Date = new Date()): Date => billingPeriod(anchor, now).start;

/**
 * What happens past a monthly quota. Free stops (API calls and MCP queries refused with 429
 * QUOTA_EXCEEDED, ingest events dropped); Team and Business carry on and the overage is billed;
 * Enterprise has no quota.
 */
export type OverQuota = 'refused' | 'dropped' | 'billed' | 'unlimited';

const hardStop = (plan: Plan) => plan === 'free';

export interface IngestReservation {
  granted: number;
  /** Events refused for quota (Free plan only; other plans count the overage instead). */
  dropped: number;
}

/** On Free, events over the monthly quota are dropped; other plans are granted and the overage counted. */
export async function reserveIngestEvents(db: Db, operator: Operator, requested: number, now = new Date()): Promise<IngestReservation> {
  if (requested <= 0) return { granted: 0, dropped: 0 };
  const cap = hardStop(operator.plan) ? PLAN_LIMITS[operator.plan].ingestEvents : null;
  const granted = await reserveIngest(db, operator.id, billingPeriodStart(operator.billingAnchor, now), requested, cap);
  return { granted, dropped: requested - granted };
}

/** Undoes a reservation whose events were never accepted (Kafka did not take them); pass the reservation's `now`. */
export async function releaseIngestEvents(db: Db, operator: Operator, reservation: IngestReservation, now: Date): Promise<void> {
  if (reservation.granted + reservation.dropped === 0) return;
  await releaseIngest(db, operator.id, billingPeriodStart(operator.billingAnchor, now), reservation.granted, reservation.dropped);
}

const quotaOf = (plan: Plan, counter: UsageCounter): number =>
  counter === 'api_calls' ? PLAN_LIMITS[plan].apiCalls : PLAN_LIMITS[plan].mcpQueries;

const COUNTER_NAMES: Record<UsageCounter, string> = { api_calls: 'API calls', mcp_queries: 'MCP queries' };

/**
 * Counts one API call or MCP query for the current billing month (a single upsert) and returns
 * the new total. On Free, a call past the quota is refused with 429 QUOTA_EXCEEDED and not counted.
 */
export async function countUsage(db: Db, operator: Operator, counter: UsageCounter, now = new Date()): Promise<number> {
  const period = billingPeriod(operator.billingAnchor, now);
  const quota = quotaOf(operator.plan, counter);
  const used = await addUsage(db, operator.id, period.start, counter, 1, hardStop(operator.plan) ? quota : null);
  if (used !== undefined) return used;
  const current = (await usageFor(db, operator.id, period.start))[counter];
  const retryAfter = Math.max(1, Math.ceil((period.end.getTime() - now.getTime()) / 1000));
  throw new AppError(
    429,
    'QUOTA_EXCEEDED',
    `the Free plan's monthly quota of ${quota} ${COUNTER_NAMES[counter]} is used up; it resets at ${period.end.toISOString()} (upgrade the plan for more)`,
    { quota, used: current, resetsAt: period.end.toISOString() },
    { 'Retry-After': String(retryAfter) },
  );
}

export interface CounterReport {
  used: number;
  /** null = unlimited. */
  quota: number | null;
  remaining: number | null;
  /** Usage past the quota (billed on Team and Business). */
  overage: number;
  overQuota: OverQuota;
}

export interface UsageReport {
  plan: Plan;
  planName: string;
  periodStart: string;
  resetsAt: string;
  apiCalls: CounterReport;
  mcpQueries: CounterReport;
  ingestEvents: CounterReport & { dropped: number };
  maxVenues: number | null;
  retentionDays: number;
}

/** The current billing month's counters against the plan's quotas. */
export async function usageReport(db: Db, operator: Operator, now = new Date()): Promise<UsageReport> {
  const limits = PLAN_LIMITS[operator.plan];
  const period = billingPeriod(operator.billingAnchor, now);
  const usage = await usageFor(db, operator.id, period.start);
  const report = (used: number, quota: number, stop: OverQuota): CounterReport => {
    if (!Number.isFinite(quota)) return { used, quota: null, remaining: null, overage: 0, overQuota: 'unlimited' };
    return {
      used,
      quota,
      remaining: Math.max(0, quota - used),
      overage: Math.max(0, used - quota),
      overQuota: hardStop(operator.plan) ? stop : 'billed',
    };
  };
  return {
    plan: operator.plan,
    planName: limits.label,
    periodStart: period.start.toISOString(),
    resetsAt: period.end.toISOString(),
    apiCalls: report(usage.api_calls, limits.apiCalls, 'refused'),
    mcpQueries: report(usage.mcp_queries, limits.mcpQueries, 'refused'),
    ingestEvents: { ...report(usage.ingest_events, limits.ingestEvents, 'dropped'), dropped: usage.ingest_dropped },
    maxVenues: Number.isFinite(limits.maxVenues) ? limits.maxVenues : null,
    retentionDays: limits.retentionDays,
  };
}
