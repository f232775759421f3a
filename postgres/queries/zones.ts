import { one, rows, sql, type Queryable } from '../client.js';
import type { DeletedRow } from './venues.js';

export interface ZoneFields {
  slug: string;
  name: string;
  type: string;
  capacity: number | null;
}

export interface ZoneRow extends ZoneFields {
  id: string;
  venue_id: string;
  is_active: boolean;
  created_at: Date;
  updated_at: Date;
}

export type ZoneSummaryRow = Pick<ZoneRow, 'id' | 'slug' | 'name' | 'type' | 'capacity' | 'is_active'>;

/** True when `err` is the violation of the one-live-slug-per-venue index. */
export function isZoneSlugConflict(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === '23505' && e.constraint === 'zones_venue_slug_live';
}

export async function activeZones(db: Queryable, venueId: string): Promise<ZoneSummaryRow[]> {
  return rows<ZoneSummaryRow>(
    db,
    sql`SELECT id, slug, name, type, capacity, is_active FROM zones
         WHERE venue_id = ${venueId} AND is_active ORDER BY created_at, id`,
  );
}

export async function activeZone(db: Queryable, venueId: string, zoneId: string): Promise<ZoneRow | undefined> {
  return one<ZoneRow>(
    db,
    sql`SELECT id, venue_id, slug, name, type, capacity, is_active, created_at, updated_at FROM zones
         WHERE id = ${zoneId} AND venue_id = ${venueId} AND is_active`,
  );
}

export async function insertZone(db: Queryable, venueId: string, z: ZoneFields): Promise<ZoneRow> {
  return (await one<ZoneRow>(
    db,
    sql`INSERT INTO zones (venue_id, slug, name, type, capacity)
        VALUES (${venueId}, ${z.slug}, ${z.name}, ${z.type}, ${z.capacity})
        RETURNING id, venue_id, slug, name, type, capacity, is_active, created_at, updated_at`,
  ))!;
}

/** Sets only the fields present in `patch` (capacity: null clears it). */
export async function updateZoneFields(
  db: Queryable,
  venueId: string,
  zoneId: string,
  patch: Partial<ZoneFields>,
): Promise<ZoneRow | undefined> {
  const has = (k: keyof ZoneFields) => patch[k] !== undefined;
  return one<ZoneRow>(
    db,
    sql`UPDATE zones SET
          slug       = CASE WHEN ${has('slug')}::boolean THEN ${patch.slug ?? null}::text ELSE slug END,
          name       = CASE WHEN ${has('name')}::boolean THEN ${patch.name ?? null}::text ELSE name END,
          type       = CASE WHEN ${has('type')}::boolean THEN ${patch.type ?? null}::text ELSE type END,
          capacity   = CASE WHEN ${has('capacity')}::boolean THEN ${patch.capacity ?? null}::double precision ELSE capacity END,
          updated_at = now()
        WHERE id = ${zoneId} AND venue_id = ${venueId} AND is_active
        RETURNING id, venue_id, slug, name, type, capacity, is_active, created_at, updated_at`,
  );
}

/** Soft delete; leaving the live-slug index frees the slug for a new zone. */
export async function softDeleteZone(db: Queryable, venueId: string, zoneId: string): Promise<DeletedRow | undefined> {
  return one<DeletedRow>(
    db,
    sql`UPDATE zones SET is_active = false, deleted_at = now(), updated_at = now()
         WHERE id = ${zoneId} AND venue_id = ${venueId} AND is_active
        RETURNING id, is_active, deleted_at`,
  );
}
