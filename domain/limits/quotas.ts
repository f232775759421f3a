import type { Db } from '../../postgres/client.js';
import { addUsage, reserveIngest, type UsageCounter } from '../../postgres/queries/usage.js';
import type { Operator } from '../tenants/operators.js';
import { PLAN_LIMITS } from '../tenants/plans.js';

/** The start of the billing month containing `now`: the anchor plus a whole number of months. */
export function billingPeriodStart(anchor: Date, now: Date = new Date()): Date {
  let months = (now.getUTCFullYear() - anchor.getUTCFullYear()) * 12 + (now.getUTCMonth() - anchor.getUTCMonth());
  const at = (m: number) => {
    const d = new Date(anchor);
    const day = anchor.getUTCDate();
    d.setUTCDate(1);
    d.setUTCMonth(anchor.getUTCMonth() + m);
    // A 31st anchor falls on the last day of shorter months.
    const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
    d.setUTCDate(Math.min(day, last));
    return d;
  };
  while (months > 0 && at(months) > now) months--;
  return at(Math.max(0, months));
}

export interface IngestReservation {
  granted: number;
  /** Events refused for quota (Free plan only; other plans count the overage instead). */
  dropped: number;
}

/** On Free, events over the monthly quota are dropped; other plans are granted and the overage counted. */
export async function reserveIngestEvents(db: Db, operator: Operator, requested: number, now = new Date()): Promise<IngestReservation> {
  if (requested <= 0) return { granted: 0, dropped: 0 };
  const cap = operator.plan === 'free' ? PLAN_LIMITS.free.ingestEvents : null;
  const granted = await reserveIngest(db, operator.id, billingPeriodStart(operator.billingAnchor, now), requested, cap);
  return { granted, dropped: requested - granted };
}

export async function countUsage(db: Db, operator: Operator, counter: UsageCounter, now = new Date()): Promise<number> {
  return addUsage(db, operator.id, billingPeriodStart(operator.billingAnchor, now), counter, 1);
}
