import { one, sql, type Queryable } from '../client.js';

export async function platformCounts(db: Queryable): Promise<{ operator_count: number; venue_count: number; last_event_at: Date | null }> {
  return (await one(
    db,
    sql`SELECT (SELECT count(*) FROM operators)                    AS operator_count,
               (SELECT count(*) FROM venues WHERE is_active)       AS venue_count,
               (SELECT max(last_event_at) FROM venues)             AS last_event_at`,
  ))!;
}
