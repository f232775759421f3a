import { exec, one, rows, sql, type Queryable } from '../client.js';
import type { Plan } from '../../lib/plans.js';

export interface VenueOwnership {
  id: string;
  operator_id: string;
  is_active: boolean;
  timezone: string;
  occupancy_reset_hour: number;
}

export async function venueOwnership(db: Queryable, venueId: string): Promise<VenueOwnership | undefined> {
  return one<VenueOwnership>(db, sql`SELECT id, operator_id, is_active, timezone, occupancy_reset_hour FROM venues WHERE id = ${venueId}`);
}

/** The fields a caller may set; null clears an optional one. */
export interface VenueFields {
  name: string;
  timezone: string;
  address: string | null;
  lat: number | null;
  lng: number | null;
  hardware_type: string | null;
  /** Venue-local hour (0..23) of the daily occupancy reset; default 4. */
  occupancy_reset_hour: number;
}

export interface VenueRow extends VenueFields {
  id: string;
  operator_id: string;
  is_active: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface VenueListRow extends VenueRow {
  zone_count: number;
  last_event_at: Date | null;
}

export interface CreatedVenueRow {
  id: string;
  name: string;
  timezone: string;
  is_active: boolean;
  operator_id: string;
  created_at: Date;
}

export interface DeletedRow {
  id: string;
  is_active: false;
  deleted_at: Date;
}

/** Locks the operator row so concurrent venue creations for one operator queue behind each other. */
export async function lockOperatorPlan(db: Queryable, operatorId: string): Promise<Plan | undefined> {
  return (await one<{ plan: Plan }>(db, sql`SELECT plan FROM operators WHERE id = ${operatorId} FOR UPDATE`))?.plan;
}

export async function countActiveVenues(db: Queryable, operatorId: string): Promise<number> {
  return (await one<{ n: number }>(db, sql`SELECT count(*) AS n FROM venues WHERE operator_id = ${operatorId} AND is_active`))!.n;
}

export async function insertVenue(
  db: Queryable,
  operatorId: string,
  v: Partial<VenueFields> & Pick<VenueFields, 'name' | 'timezone'>,
): Promise<CreatedVenueRow> {
  return (await one<CreatedVenueRow>(
    db,
    sql`INSERT INTO venues (operator_id, name, timezone, address, lat, lng, hardware_type, occupancy_reset_hour)
        VALUES (${operatorId}, ${v.name}, ${v.timezone}, ${v.address ?? null}, ${v.lat ?? null}, ${v.lng ?? null}, ${v.hardware_type ?? null}, ${v.occupancy_reset_hour ?? 4})
        RETURNING id, name, timezone, is_active, operator_id, created_at`,
  ))!;
}

export async function activeVenuePage(db: Queryable, operatorId: string, limit: number, offset: number): Promise<VenueListRow[]> {
  return rows<VenueListRow>(
    db,
    sql`SELECT v.id, v.name, v.timezone, v.address, v.lat, v.lng, v.hardware_type, v.occupancy_reset_hour, v.is_active, v.operator_id,
               (SELECT count(*) FROM zones z WHERE z.venue_id = v.id AND z.is_active) AS zone_count,
               v.last_event_at, v.created_at, v.updated_at
          FROM venues v
         WHERE v.operator_id = ${operatorId} AND v.is_active
         ORDER BY v.created_at, v.id
         LIMIT ${limit} OFFSET ${offset}`,
  );
}

export async function activeVenueById(db: Queryable, operatorId: string, venueId: string): Promise<VenueRow | undefined> {
  return one<VenueRow>(
    db,
    sql`SELECT id, name, timezone, address, lat, lng, hardware_type, occupancy_reset_hour, is_active, operator_id, created_at, updated_at
          FROM venues WHERE id = ${venueId} AND operator_id = ${operatorId} AND is_active`,
  );
}

/** Sets only the fields present in `patch` (an explicit null clears an optional field). */
export async function updateVenueFields(
  db: Queryable,
  operatorId: string,
  venueId: string,
  patch: Partial<VenueFields>,
): Promise<VenueRow | undefined> {
  const has = (k: keyof VenueFields) => patch[k] !== undefined;
  return one<VenueRow>(
    db,
    sql`UPDATE venues SET
          name          = CASE WHEN ${has('name')}::boolean THEN ${patch.name ?? null}::text ELSE name END,
          timezone      = CASE WHEN ${has('timezone')}::boolean THEN ${patch.timezone ?? null}::text ELSE timezone END,
          address       = CASE WHEN ${has('address')}::boolean THEN ${patch.address ?? null}::text ELSE address END,
          lat           = CASE WHEN ${has('lat')}::boolean THEN ${patch.lat ?? null}::double precision ELSE lat END,
          lng           = CASE WHEN ${has('lng')}::boolean THEN ${patch.lng ?? null}::double precision ELSE lng END,
          hardware_type = CASE WHEN ${has('hardware_type')}::boolean THEN ${patch.hardware_type ?? null}::text ELSE hardware_type END,
          occupancy_reset_hour = CASE WHEN ${has('occupancy_reset_hour')}::boolean THEN ${patch.occupancy_reset_hour ?? null}::smallint ELSE occupancy_reset_hour END,
          updated_at    = now()
        WHERE id = ${venueId} AND operator_id = ${operatorId} AND is_active
        RETURNING id, name, timezone, address, lat, lng, hardware_type, occupancy_reset_hour, is_active, operator_id, created_at, updated_at`,
  );
}

/** Soft delete: the row, its zones and integrations stay for history. */
export async function softDeleteVenue(db: Queryable, operatorId: string, venueId: string): Promise<DeletedRow | undefined> {
  return one<DeletedRow>(
    db,
    sql`UPDATE venues SET is_active = false, deleted_at = now(), updated_at = now()
         WHERE id = ${venueId} AND operator_id = ${operatorId} AND is_active
        RETURNING id, is_active, deleted_at`,
  );
}

/** What the event sink needs per venue: its operator, time zone and the operator's plan (retention class). */
export interface VenueSinkContext {
  id: string;
  operator_id: string;
  timezone: string;
  plan: Plan;
}

export async function venueSinkContexts(db: Queryable, venueIds: string[]): Promise<VenueSinkContext[]> {
  return rows<VenueSinkContext>(
    db,
    sql`SELECT v.id, v.operator_id, v.timezone, o.plan
          FROM venues v JOIN operators o ON o.id = v.operator_id
         WHERE v.id = ANY(${venueIds}::uuid[])`,
  );
}

/**
 * One statement per sink batch: moves each venue's last_event_at, and each (venue, connector type)'s
 * in venue_connector_events, forward, never back (a backfill of old events leaves both alone).
 * Unknown venues are skipped, so a stray id cannot fail the venues' update. Returns the
 * (venue, connector type) rows written.
 */
export async function advanceLastEventAt(
  db: Queryable,
  latest: Array<{ venueId: string; connectorType: string; at: Date }>,
): Promise<number> {
  if (latest.length === 0) return 0;
  return exec(
    db,
    sql`WITH x AS (
          SELECT id, type, max(at) AS at
            FROM unnest(${latest.map((l) => l.venueId)}::uuid[], ${latest.map((l) => l.connectorType)}::text[], ${latest.map((l) => l.at)}::timestamptz[]) AS u(id, type, at)
           GROUP BY id, type
        ), venue AS (
          UPDATE venues v SET last_event_at = m.at
            FROM (SELECT id, max(at) AS at FROM x GROUP BY id) m
           WHERE v.id = m.id AND (v.last_event_at IS NULL OR v.last_event_at < m.at)
        )
        INSERT INTO venue_connector_events AS c (venue_id, connector_type, last_event_at)
        SELECT x.id, x.type, x.at FROM x JOIN venues v ON v.id = x.id
         ORDER BY x.id, x.type
        ON CONFLICT (venue_id, connector_type) DO UPDATE SET last_event_at = EXCLUDED.last_event_at
         WHERE c.last_event_at < EXCLUDED.last_event_at`,
  );
}

/** What the stream processors need per venue: zones (type, capacity) and active integrations, with the sink's context. */
export interface VenueProcessorContext extends VenueSinkContext {
  is_active: boolean;
  occupancy_reset_hour: number;
  zones: Array<{ id: string; name: string; type: 'area' | 'entrance' | 'exit' | 'counter'; capacity: number | null }>;
  integrations: Array<{ id: string; connector_type: string; created_at: string }>;
}

export async function venueProcessorContexts(db: Queryable, venueIds: string[]): Promise<VenueProcessorContext[]> {
  return rows<VenueProcessorContext>(
    db,
    sql`SELECT v.id, v.operator_id, v.timezone, o.plan, v.is_active, v.occupancy_reset_hour,
               COALESCE((SELECT json_agg(json_build_object('id', z.id, 'name', z.name, 'type', z.type, 'capacity', z.capacity) ORDER BY z.created_at, z.id)
                           FROM zones z WHERE z.venue_id = v.id AND z.is_active), '[]') AS zones,
               COALESCE((SELECT json_agg(json_build_object('id', i.id, 'connector_type', i.connector_type, 'created_at', i.created_at) ORDER BY i.created_at, i.id)
                           FROM integrations i WHERE i.venue_id = v.id AND i.is_active AND i.deleted_at IS NULL), '[]') AS integrations
          FROM venues v JOIN operators o ON o.id = v.operator_id
         WHERE v.id = ANY(${venueIds}::uuid[])`,
  );
}
