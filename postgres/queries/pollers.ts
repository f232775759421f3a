import { exec, one, rows, sql, type Queryable } from '../client.js';

/** A lease this owner holds after takeLeases, with what the previous polls left. */
export interface PollerLeaseRow {
  integration_id: string;
  cursor: unknown;
  failures: number;
}

export interface PollerStateRow {
  integration_id: string;
  owner: string | null;
  lease_until: Date | null;
  cursor: unknown;
  last_ok_at: Date | null;
  last_error_at: Date | null;
  last_error: string | null;
  failures: number;
  updated_at: Date;
}

/**
 * Takes or renews the lease of each integration in one statement: a row is (re)written only where
 * nobody holds it, this owner holds it, or its holder's lease lapsed (the database clock decides,
 * so instances' clocks never disagree). Returns the leases this owner holds now. Ids are locked in
 * sorted order, so two instances taking the same ids never deadlock. Only integrations still active
 * are leased: the caller's list may be older than a deactivation, which must not be leased again.
 */
export async function takeLeases(
  db: Queryable,
  integrationIds: readonly string[],
  owner: string,
  leaseMs: number,
): Promise<PollerLeaseRow[]> {
  if (integrationIds.length === 0) return [];
  return rows<PollerLeaseRow>(
    db,
    sql`INSERT INTO poller_state (integration_id, owner, lease_until)
        SELECT i.id, ${owner}, now() + ${leaseMs} * interval '1 millisecond'
          FROM integrations i
         WHERE i.id = ANY(${[...integrationIds]}::uuid[]) AND i.is_active
         ORDER BY i.id
        ON CONFLICT (integration_id) DO UPDATE
           SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until, updated_at = now()
         WHERE poller_state.owner = EXCLUDED.owner OR poller_state.owner IS NULL
            OR poller_state.lease_until IS NULL OR poller_state.lease_until < now()
        RETURNING integration_id, cursor, failures`,
  );
}

/** Gives leases up (on stop, or an integration no longer polled), so another instance takes them at once. */
export async function releaseLeases(db: Queryable, integrationIds: readonly string[], owner: string): Promise<number> {
  if (integrationIds.length === 0) return 0;
  return exec(
    db,
    sql`UPDATE poller_state SET owner = NULL, lease_until = NULL, updated_at = now()
         WHERE integration_id = ANY(${[...integrationIds]}::uuid[]) AND owner = ${owner}`,
  );
}

/**
 * A successful poll: the new cursor, written only while this owner still holds a live lease
 * (fenced: a poller that lost its lease mid-poll cannot move the cursor of the new owner). False
 * when the lease was lost.
 */
export async function saveCursor(db: Queryable, integrationId: string, owner: string, cursor: unknown): Promise<boolean> {
  const n = await exec(
    db,
    sql`UPDATE poller_state SET cursor = ${JSON.stringify(cursor ?? null)}::jsonb, last_ok_at = now(), failures = 0, updated_at = now()
         WHERE integration_id = ${integrationId} AND owner = ${owner} AND lease_until > now()`,
  );
  return n === 1;
}

/** A failed poll: counts it and keeps its reason (fenced like saveCursor). Returns the failures in a row, or undefined when the lease was lost. */
export async function recordPollFailure(db: Queryable, integrationId: string, owner: string, error: string): Promise<number | undefined> {
  const row = await one<{ failures: number }>(
    db,
    sql`UPDATE poller_state SET failures = failures + 1, last_error = ${error.slice(0, 1000)}, last_error_at = now(), updated_at = now()
         WHERE integration_id = ${integrationId} AND owner = ${owner} AND lease_until > now()
        RETURNING failures`,
  );
  return row?.failures;
}

export async function pollerState(db: Queryable, integrationId: string): Promise<PollerStateRow | undefined> {
  return one<PollerStateRow>(
    db,
    sql`SELECT integration_id, owner, lease_until, cursor, last_ok_at, last_error_at, last_error, failures, updated_at
          FROM poller_state WHERE integration_id = ${integrationId}`,
  );
}

/** The plain (non-secret) config of these integrations, to tell which are polled without opening any secret. */
export async function plainConfigs(db: Queryable, integrationIds: readonly string[]): Promise<Map<string, Record<string, unknown>>> {
  if (integrationIds.length === 0) return new Map();
  const found = await rows<{ id: string; config: Record<string, unknown> }>(
    db,
    sql`SELECT id, config FROM integrations WHERE id = ANY(${[...integrationIds]}::uuid[])`,
  );
  return new Map(found.map((r) => [r.id, r.config]));
}
