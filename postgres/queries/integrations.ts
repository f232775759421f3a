import { exec, one, rows, sql, type Queryable } from '../client.js';
import type { ConnectorType } from '../../lib/events/vocabulary.js';
import type { Envelope } from '../../lib/secret-box.js';
import type { DeletedRow } from './venues.js';
import type { Plan } from '../../lib/plans.js';

export interface IntegrationRow {
  id: string;
  venue_id: string;
  connector_type: ConnectorType;
  is_active: boolean;
  /** Non-secret config fields, as stored. */
  config: Record<string, unknown>;
  /** Secret field name → its sealed envelope. */
  secrets: Record<string, Envelope>;
  created_at: Date;
  updated_at: Date;
}

export type IntegrationSummaryRow = Pick<IntegrationRow, 'id' | 'connector_type' | 'is_active' | 'created_at'>;

/** Not soft-deleted integrations of a venue, active or not. */
export async function liveIntegrations(db: Queryable, venueId: string): Promise<IntegrationRow[]> {
  return rows<IntegrationRow>(
    db,
    sql`SELECT id, venue_id, connector_type, is_active, config, secrets, created_at, updated_at FROM integrations
         WHERE venue_id = ${venueId} AND deleted_at IS NULL ORDER BY created_at, id`,
  );
}

export async function liveIntegrationSummaries(db: Queryable, venueId: string): Promise<IntegrationSummaryRow[]> {
  return rows<IntegrationSummaryRow>(
    db,
    sql`SELECT id, connector_type, is_active, created_at FROM integrations
         WHERE venue_id = ${venueId} AND deleted_at IS NULL ORDER BY created_at, id`,
  );
}

export async function liveIntegration(db: Queryable, venueId: string, integrationId: string): Promise<IntegrationRow | undefined> {
  return one<IntegrationRow>(
    db,
    sql`SELECT id, venue_id, connector_type, is_active, config, secrets, created_at, updated_at FROM integrations
         WHERE id = ${integrationId} AND venue_id = ${venueId} AND deleted_at IS NULL`,
  );
}

/** As liveIntegration, locking the row until the transaction ends (read-modify-write of secrets). */
export async function lockLiveIntegration(db: Queryable, venueId: string, integrationId: string): Promise<IntegrationRow | undefined> {
  return one<IntegrationRow>(
    db,
    sql`SELECT id, venue_id, connector_type, is_active, config, secrets, created_at, updated_at FROM integrations
         WHERE id = ${integrationId} AND venue_id = ${venueId} AND deleted_at IS NULL FOR UPDATE`,
  );
}

export async function insertIntegration(
  db: Queryable,
  i: { id: string; venueId: string; connectorType: ConnectorType; config: Record<string, unknown>; secrets: Record<string, Envelope> },
): Promise<IntegrationRow> {
  return (await one<IntegrationRow>(
    db,
    sql`INSERT INTO integrations (id, venue_id, connector_type, config, secrets)
        VALUES (${i.id}, ${i.venueId}, ${i.connectorType}, ${JSON.stringify(i.config)}::jsonb, ${JSON.stringify(i.secrets)}::jsonb)
        RETURNING id, venue_id, connector_type, is_active, config, secrets, created_at, updated_at`,
  ))!;
}

export async function updateIntegrationRow(
  db: Queryable,
  integrationId: string,
  u: { config: Record<string, unknown>; secrets: Record<string, Envelope>; isActive: boolean },
): Promise<IntegrationRow> {
  return (await one<IntegrationRow>(
    db,
    sql`UPDATE integrations
           SET config = ${JSON.stringify(u.config)}::jsonb, secrets = ${JSON.stringify(u.secrets)}::jsonb,
               is_active = ${u.isActive}, updated_at = now()
         WHERE id = ${integrationId}
        RETURNING id, venue_id, connector_type, is_active, config, secrets, created_at, updated_at`,
  ))!;
}

/** Soft delete; the sealed secrets are erased, the plain config stays for history. */
export async function softDeleteIntegration(db: Queryable, venueId: string, integrationId: string): Promise<DeletedRow | undefined> {
  return one<DeletedRow>(
    db,
    sql`UPDATE integrations SET is_active = false, secrets = '{}', deleted_at = now(), updated_at = now()
         WHERE id = ${integrationId} AND venue_id = ${venueId} AND deleted_at IS NULL
        RETURNING id, is_active, deleted_at`,
  );
}

/** Ids of integrations (deleted ones included) holding an envelope sealed under another key than `keyId`. */
export async function integrationIdsSealedWithout(db: Queryable, keyId: string, limit: number): Promise<string[]> {
  const found = await rows<{ id: string }>(
    db,
    sql`SELECT id FROM integrations i
         WHERE EXISTS (SELECT 1 FROM jsonb_each(i.secrets) e WHERE e.value->>'kid' IS DISTINCT FROM ${keyId})
         ORDER BY id LIMIT ${limit}`,
  );
  return found.map((r) => r.id);
}

export async function lockIntegrationSecrets(db: Queryable, integrationId: string): Promise<Record<string, Envelope> | undefined> {
  return (
    await one<{ secrets: Record<string, Envelope> }>(db, sql`SELECT secrets FROM integrations WHERE id = ${integrationId} FOR UPDATE`)
  )?.secrets;
}

/** Replaces the envelopes only; a key rotation is not a change a caller made, so updated_at stays. */
export async function replaceIntegrationSecrets(db: Queryable, integrationId: string, secrets: Record<string, Envelope>): Promise<void> {
  await exec(db, sql`UPDATE integrations SET secrets = ${JSON.stringify(secrets)}::jsonb WHERE id = ${integrationId}`);
}

/**
 * Active, non-deleted integrations of the operator's active venues, each with the newest stored
 * event of its venue and connector type (null when none was stored).
 */
export async function operatorActiveIntegrations(
  db: Queryable,
  operatorId: string,
): Promise<Array<{ id: string; venue_id: string; connector_type: ConnectorType; created_at: Date; last_event_at: Date | null }>> {
  return rows(
    db,
    sql`SELECT i.id, i.venue_id, i.connector_type, i.created_at, e.last_event_at
          FROM integrations i JOIN venues v ON v.id = i.venue_id
          LEFT JOIN venue_connector_events e ON e.venue_id = i.venue_id AND e.connector_type = i.connector_type
         WHERE v.operator_id = ${operatorId} AND v.is_active AND i.is_active AND i.deleted_at IS NULL
         ORDER BY i.created_at, i.id`,
  );
}

export interface SourceIntegrationRow extends IntegrationRow {
  operator_id: string;
  plan: Plan;
  billing_anchor: Date;
}

/**
 * An integration a vendor link may deliver for: live and active, of an active venue. Found by id
 * alone, since a webhook or a poller carries no operator key.
 */
export async function sourceIntegrationRow(db: Queryable, integrationId: string): Promise<SourceIntegrationRow | undefined> {
  return one<SourceIntegrationRow>(
    db,
    sql`SELECT i.id, i.venue_id, i.connector_type, i.is_active, i.config, i.secrets, i.created_at, i.updated_at,
               v.operator_id, o.plan, o.billing_anchor
          FROM integrations i JOIN venues v ON v.id = i.venue_id JOIN operators o ON o.id = v.operator_id
         WHERE i.id = ${integrationId} AND i.is_active AND i.deleted_at IS NULL AND v.is_active`,
  );
}

/** Ids of the live, active integrations of these connector types on active venues (the pollers' work list). */
export async function activeIntegrationIdsOfTypes(
  db: Queryable,
  types: readonly ConnectorType[],
): Promise<Array<{ id: string; connector_type: ConnectorType }>> {
  return rows(
    db,
    sql`SELECT i.id, i.connector_type FROM integrations i JOIN venues v ON v.id = i.venue_id
         WHERE i.connector_type = ANY(${[...types]}) AND i.is_active AND i.deleted_at IS NULL AND v.is_active
         ORDER BY i.id`,
  );
}
