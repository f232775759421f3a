import type { Queryable } from '../../postgres/client.js';
import { venueOwnership, type VenueOwnership } from '../../postgres/queries/venues.js';
import { forbidden, notFound } from '../../lib/errors.js';

/**
 * The venue if the operator owns it and it is active: absent or soft-deleted → 404,
 * another operator's → 403. Every venue-scoped path (and zones through their venue) goes through here.
 */
export async function ownedVenue(db: Queryable, operatorId: string, venueId: string): Promise<VenueOwnership> {
  const venue = await venueOwnership(db, venueId);
  if (!venue || !venue.is_active) throw notFound('venue');
  if (venue.operator_id !== operatorId) throw forbidden('this venue belongs to another operator');
  return venue;
}
