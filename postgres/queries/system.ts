import { exec, one, sql, type Queryable } from '../client.js';

/** One round trip, for the health probe. */
export async function pingDb(db: Queryable): Promise<void> {
  await exec(db, sql`SELECT 1`);
}

export async function platformCounts(db: Queryable): Promise<{ operator_count: number; venue_count: number; last_event_at: Date | null }> {
  return (await one(
    db,
    sql`SELECT (SELECT count(*) FROM operators)                    AS operator_count,
               (SELECT count(*) FROM venues WHERE is_active)       AS venue_count,
               (SELECT max(last_event_at) FROM venues)             AS last_event_at`,
  ))!;
}
