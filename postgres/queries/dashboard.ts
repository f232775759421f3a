import { one, rows, sql, type Queryable } from '../client.js';

/** Active venues, and active, non-deleted integrations of active venues, of one operator. */
export async function dashboardCounts(db: Queryable, operatorId: string): Promise<{ venue_count: number; active_integrations: number }> {
  return (await one<{ venue_count: number; active_integrations: number }>(
    db,
    sql`SELECT (SELECT count(*) FROM venues WHERE operator_id = ${operatorId} AND is_active) AS venue_count,
               (SELECT count(*) FROM integrations i JOIN venues v ON v.id = i.venue_id
                 WHERE v.operator_id = ${operatorId} AND v.is_active AND i.is_active AND i.deleted_at IS NULL) AS active_integrations`,
  ))!;
}

export interface PortfolioVenueRow {
  id: string;
  name: string;
  timezone: string;
  /** Active zones' types and capacities (the venue's capacity is read from them). */
  zones: Array<{ type: string; capacity: number | null }>;
}

/** The operator's active venues with their active zones' types and capacities, oldest first. */
export async function portfolioVenues(db: Queryable, operatorId: string): Promise<PortfolioVenueRow[]> {
  return rows<PortfolioVenueRow>(
    db,
    sql`SELECT v.id, v.name, v.timezone,
               COALESCE((SELECT json_agg(json_build_object('type', z.type, 'capacity', z.capacity))
                           FROM zones z WHERE z.venue_id = v.id AND z.is_active), '[]'::json) AS zones
          FROM venues v WHERE v.operator_id = ${operatorId} AND v.is_active
         ORDER BY v.created_at, v.id`,
  );
}

/** Active alarms of the operator per venue and severity. */
export async function activeAlarmCounts(
  db: Queryable,
  operatorId: string,
): Promise<Array<{ venue_id: string; severity: string; alarms: number }>> {
  return rows(
    db,
    sql`SELECT venue_id, severity, count(*)::int AS alarms FROM alarms
         WHERE operator_id = ${operatorId} AND cleared_at IS NULL GROUP BY venue_id, severity`,
  );
}
