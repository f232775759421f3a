import { one, sql, type Queryable } from '../client.js';

/** Active venues, and active, non-deleted integrations of active venues, of one operator. */
export async function dashboardCounts(db: Queryable, operatorId: string): Promise<{ venue_count: number; active_integrations: number }> {
  return (await one<{ venue_count: number; active_integrations: number }>(
    db,
    sql`SELECT (SELECT count(*) FROM venues WHERE operator_id = ${operatorId} AND is_active) AS venue_count,
               (SELECT count(*) FROM integrations i JOIN venues v ON v.id = i.venue_id
                 WHERE v.operator_id = ${operatorId} AND v.is_active AND i.is_active AND i.deleted_at IS NULL) AS active_integrations`,
  ))!;
}
