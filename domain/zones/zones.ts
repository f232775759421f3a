import type { Db } from '../../postgres/client.js';
import {
  activeZone,
  activeZones,
  insertZone,
  isZoneSlugConflict,
  softDeleteZone,
  updateZoneFields,
  type ZoneFields,
  type ZoneRow,
  type ZoneSummaryRow,
} from '../../postgres/queries/zones.js';
import type { DeletedRow } from '../../postgres/queries/venues.js';
import { conflict, notFound } from '../../lib/errors.js';
import { ownedVenue } from '../venues/access.js';

export const ZONE_TYPES = ['area', 'entrance', 'exit', 'counter'] as const;
export type ZoneType = (typeof ZONE_TYPES)[number];

/** URL-safe: lower-case words of letters and digits joined by single hyphens. */
export const ZONE_SLUG = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

export type NewZone = Pick<ZoneFields, 'slug' | 'name'> & { type: ZoneType; capacity?: number | null };

/** The zone must be a live zone of this venue, and the venue the operator's (zone → venue → operator). */
async function ownedZone(db: Db, operatorId: string, venueId: string, zoneId: string): Promise<ZoneRow> {
  await ownedVenue(db, operatorId, venueId);
  const zone = await activeZone(db, venueId, zoneId);
  if (!zone) throw notFound('zone');
  return zone;
}

const slugTaken = (slug: string) =>
  conflict('CONFLICT', `a zone with slug "${slug}" already exists in this venue`, [{ field: 'slug', message: `"${slug}" is taken` }]);

/** Maps the live-slug unique index to a 409 naming the slug; concurrent creations cannot both win. */
async function slugChecked<T>(slug: string | undefined, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (slug !== undefined && isZoneSlugConflict(err)) throw slugTaken(slug);
    throw err;
  }
}

export async function listZones(db: Db, operatorId: string, venueId: string): Promise<{ data: ZoneSummaryRow[]; total: number }> {
  await ownedVenue(db, operatorId, venueId);
  const data = await activeZones(db, venueId);
  return { data, total: data.length };
}

export async function createZone(db: Db, operatorId: string, venueId: string, input: NewZone): Promise<ZoneRow> {
  await ownedVenue(db, operatorId, venueId);
  return slugChecked(input.slug, () => insertZone(db, venueId, { ...input, capacity: input.capacity ?? null }));
}

export async function getZone(db: Db, operatorId: string, venueId: string, zoneId: string): Promise<ZoneRow> {
  return ownedZone(db, operatorId, venueId, zoneId);
}

export async function updateZone(db: Db, operatorId: string, venueId: string, zoneId: string, patch: Partial<NewZone>): Promise<ZoneRow> {
  await ownedZone(db, operatorId, venueId, zoneId);
  const updated = await slugChecked(patch.slug, () => updateZoneFields(db, venueId, zoneId, patch));
  if (!updated) throw notFound('zone');
  return updated;
}

export async function deleteZone(db: Db, operatorId: string, venueId: string, zoneId: string): Promise<DeletedRow> {
  await ownedZone(db, operatorId, venueId, zoneId);
  const deleted = await softDeleteZone(db, venueId, zoneId);
  if (!deleted) throw notFound('zone');
  return deleted;
}
