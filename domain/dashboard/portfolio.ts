import { z } from 'zod';
import type { Ch } from '../../clickhouse/client.js';
import { dwellInWindows, eventsInWindows, venueOccupancies, type VenueWindow } from '../../clickhouse/queries/portfolio.js';
import { ALARM_SEVERITIES } from '../../lib/events/alarms.js';
import type { Queryable } from '../../postgres/client.js';
import { activeAlarmCounts, portfolioVenues, type PortfolioVenueRow } from '../../postgres/queries/dashboard.js';
import { integrationStatuses } from '../analytics/connectors.js';
import { dayString, localDayNumber, localDayStart } from '../telemetry/calendar.js';

const count = z.number().int().nonnegative();

export const portfolioOutput = z.object({
  venues: z.array(
    z.object({
      id: z.uuid(),
      name: z.string(),
      timezone: z.string(),
      /** Today in the venue's time zone (YYYY-MM-DD): the day events_today and avg_dwell_seconds_today cover. */
      local_day: z.string(),
      occupancy: z.object({
        /** People in the venue now (0 before its first figure). */
        value: count,
        /** The venue's capacity: its largest door zone's capacity, else the sum of its area zones'; null without one. */
        capacity: z.number().nonnegative().nullable(),
        percent: z.number().nonnegative().nullable(),
        updated_at: z.iso.datetime().nullable(),
      }),
      /** Active alarms per severity. */
      alarms: z.object({ CRITICAL: count, MAJOR: count, MINOR: count, WARNING: count }),
      /** Active integrations per health status. */
      connectors: z.object({ healthy: count, degraded: count, offline: count, waiting: count }),
      events_today: count,
      /** Mean dwell of the ended whole-venue visits started today (local); null without one. */
      avg_dwell_seconds_today: z.number().nonnegative().nullable(),
    }),
  ),
  generated_at: z.iso.datetime(),
});
export type Portfolio = z.infer<typeof portfolioOutput>;
type PortfolioVenue = Portfolio['venues'][number];

/**
 * A door zone holds no one, so its capacity is read as the building's (the figure a venue is
 * licensed for); without doors, the area zones' capacities add up to the venue's.
 */
export function venueCapacity(zones: PortfolioVenueRow['zones']): number | null {
  const doors = zones.filter((z) => (z.type === 'entrance' || z.type === 'exit') && z.capacity);
  if (doors.length > 0) return Math.max(...doors.map((z) => z.capacity!));
  const areas = zones.filter((z) => z.type === 'area' && z.capacity);
  return areas.length > 0 ? areas.reduce((n, z) => n + z.capacity!, 0) : null;
}

const SEVERITY_RANK: Record<string, number> = { CRITICAL: 4, MAJOR: 3, MINOR: 2, WARNING: 1 };

/** What needs attention first: the most severe active alarm, then broken connectors, then the fullest, then by name. */
function attention(a: PortfolioVenue, b: PortfolioVenue): number {
  const worst = (v: PortfolioVenue) => Math.max(0, ...ALARM_SEVERITIES.filter((s) => v.alarms[s] > 0).map((s) => SEVERITY_RANK[s]!));
  const broken = (v: PortfolioVenue) => v.connectors.offline * 2 + v.connectors.degraded;
  return (
    worst(b) - worst(a) ||
    broken(b) - broken(a) ||
    (b.occupancy.percent ?? -1) - (a.occupancy.percent ?? -1) ||
    a.name.localeCompare(b.name)
  );
}

/**
 * Every active venue of the operator with what an operations manager looks at first: live
 * occupancy against capacity, active alarms by severity, connector health, today's events and
 * average dwell (venue-local day), sorted by what needs attention (docs/dashboard.md).
 */
export async function portfolio(deps: { db: Queryable; ch: Ch }, operatorId: string, now = Date.now()): Promise<Portfolio> {
  const venues = await portfolioVenues(deps.db, operatorId);
  const windows: VenueWindow[] = venues.map((v) => ({ venueId: v.id, fromMs: localDayStart(localDayNumber(now, v.timezone), v.timezone) }));
  const venueIds = venues.map((v) => v.id);
  const [occupancies, events, dwell, alarms, statuses] = await Promise.all([
    venueOccupancies(deps.ch, { operatorId, venueIds }),
    eventsInWindows(deps.ch, { operatorId, windows, toSec: Math.floor(now / 1000) + 1 }),
    dwellInWindows(deps.ch, { operatorId, windows, nowMs: now }),
    activeAlarmCounts(deps.db, operatorId),
    integrationStatuses(deps, operatorId, now),
  ]);
  const occupancyOf = new Map(occupancies.map((o) => [o.venue_id, o]));
  const answer = venues.map((v): PortfolioVenue => {
    const o = occupancyOf.get(v.id);
    const value = o?.value ?? 0;
    const capacity = venueCapacity(v.zones);
    const byStatus = { healthy: 0, degraded: 0, offline: 0, waiting: 0 };
    for (const s of statuses) if (s.integration.venue_id === v.id) byStatus[s.status]++;
    const bySeverity = { CRITICAL: 0, MAJOR: 0, MINOR: 0, WARNING: 0 };
    for (const a of alarms) if (a.venue_id === v.id) bySeverity[a.severity as keyof typeof bySeverity] += a.alarms;
    const dwellS = dwell.get(v.id);
    return {
      id: v.id,
      name: v.name,
      timezone: v.timezone,
      local_day: dayString(localDayNumber(now, v.timezone)),
      occupancy: {
        value,
        capacity,
        percent: capacity ? Math.round((value / capacity) * 10_000) / 100 : null,
        updated_at: o ? new Date(o.at).toISOString() : null,
      },
      alarms: bySeverity,
      connectors: byStatus,
      events_today: events.get(v.id) ?? 0,
      avg_dwell_seconds_today: dwellS === undefined ? null : Math.round(dwellS),
    };
  });
  return { venues: answer.sort(attention), generated_at: new Date(now).toISOString() };
}
