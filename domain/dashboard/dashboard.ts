import type { Ch } from '../../clickhouse/client.js';
import { operatorActivity, operatorEventCount } from '../../clickhouse/queries/dashboard.js';
import { averageDwell } from '../../clickhouse/queries/derived.js';
import type { Queryable } from '../../postgres/client.js';
import { dashboardCounts } from '../../postgres/queries/dashboard.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** Each range as a number of UTC buckets ending with the current (partial) hour or day. */
export const DASHBOARD_RANGES = {
  '24h': { buckets: 24, bucketMs: HOUR_MS },
  '7d': { buckets: 7, bucketMs: DAY_MS },
  '30d': { buckets: 30, bucketMs: DAY_MS },
  '90d': { buckets: 90, bucketMs: DAY_MS },
} as const;
export type DashboardRange = keyof typeof DASHBOARD_RANGES;

export interface DashboardStats {
  venueCount: number;
  events24h: number;
  activeIntegrations: number;
  avgDwellSeconds: number;
}

/**
 * The operator's summary. events24h: events with event time in the last 24 h (raw table).
 * avgDwellSeconds: mean dwell (whole seconds) of the ended whole-venue visits that started in the
 * last 24 h, over all the operator's venues; 0 without any.
 */
export async function dashboardStats(deps: { db: Queryable; ch: Ch }, operatorId: string, now = Date.now()): Promise<DashboardStats> {
  // Stored times are whole seconds: the window ends after the current second, so an event from this very second counts.
  const toSec = Math.floor(now / 1000) + 1;
  const [counts, events24h, avgDwell] = await Promise.all([
    dashboardCounts(deps.db, operatorId),
    operatorEventCount(deps.ch, { operatorId, fromSec: toSec - 86_400, toSec }),
    averageDwell(deps.ch, { operatorId, fromMs: now + 1 - 86_400_000, toMs: now + 1, nowMs: now }),
  ]);
  return {
    venueCount: counts.venue_count,
    events24h,
    activeIntegrations: counts.active_integrations,
    avgDwellSeconds: Math.round(avgDwell),
  };
}

export interface ActivityBucket {
  ts: number;
  events: number;
  entries: number;
  exits: number;
}

/** Events, entries and exits across all the operator's venues per UTC hour or day; empty buckets are zeros. */
export async function dashboardEvents(
  ch: Ch,
  operatorId: string,
  range: DashboardRange,
  now = Date.now(),
): Promise<{ events: ActivityBucket[]; range: DashboardRange }> {
  const { buckets, bucketMs } = DASHBOARD_RANGES[range];
  const to = Math.floor(now / bucketMs) * bucketMs + bucketMs;
  const from = to - buckets * bucketMs;
  const rows = await operatorActivity(ch, { operatorId, fromSec: from / 1000, toSec: to / 1000, bucketSec: bucketMs / 1000 });
  const events: ActivityBucket[] = Array.from({ length: buckets }, (_, i) => ({
    ts: from + i * bucketMs,
    events: 0,
    entries: 0,
    exits: 0,
  }));
  for (const r of rows) {
    const bucket = events[(r.t * 1000 - from) / bucketMs];
    if (bucket) bucket[r.key] = r.value;
  }
  return { events, range };
}
