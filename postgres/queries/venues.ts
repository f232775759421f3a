import { one, sql, type Queryable } from '../client.js';

export interface VenueOwnership {
  id: string;
  operator_id: string;
  is_active: boolean;
  timezone: string;
}

export async function venueOwnership(db: Queryable, venueId: string): Promise<VenueOwnership | undefined> {
  return one<VenueOwnership>(db, sql`SELECT id, operator_id, is_active, timezone FROM venues WHERE id = ${venueId}`);
}
