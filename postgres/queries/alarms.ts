import { exec, one, rows, sql, type Queryable, type Statement } from '../client.js';

export interface AlarmRow {
  id: string;
  operator_id: string;
  venue_id: string;
  zone_id: string | null;
  integration_id: string | null;
  type: string;
  severity: string;
  status: string;
  message: string;
  details: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  acknowledged_at: Date | null;
  cleared_at: Date | null;
}

const COLUMNS = `id, operator_id, venue_id, zone_id, integration_id, type, severity, status, message, details,
  created_at, updated_at, acknowledged_at, cleared_at`;

/** `sql` with the alarm columns spliced in where the text says {cols} (a constant, never a value). */
function withCols(stmt: Statement): Statement {
  return { text: stmt.text.replaceAll('{cols}', COLUMNS), values: stmt.values };
}

export interface AlarmFilters {
  status?: string;
  severity?: string;
  venueId?: string;
}

export async function listAlarmRows(
  db: Queryable,
  operatorId: string,
  f: AlarmFilters,
  page: { limit: number; offset: number },
): Promise<{ rows: AlarmRow[]; total: number }> {
  const where = sql`operator_id = ${operatorId}
      AND (${f.status ?? null}::text IS NULL OR status = ${f.status ?? null}::text)
      AND (${f.severity ?? null}::text IS NULL OR severity = ${f.severity ?? null}::text)
      AND (${f.venueId ?? null}::uuid IS NULL OR venue_id = ${f.venueId ?? null}::uuid)`;
  const total = await one<{ n: number }>(db, { text: `SELECT count(*)::int AS n FROM alarms WHERE ${where.text}`, values: where.values });
  const n = where.values.length;
  const page_ = await rows<AlarmRow>(db, {
    text: `SELECT ${COLUMNS} FROM alarms WHERE ${where.text} ORDER BY created_at DESC, id DESC LIMIT $${n + 1} OFFSET $${n + 2}`,
    values: [...where.values, page.limit, page.offset],
  });
  return { rows: page_, total: total?.n ?? 0 };
}

export async function alarmOwner(db: Queryable, id: string): Promise<{ operator_id: string; status: string } | undefined> {
  return one(db, sql`SELECT operator_id, status FROM alarms WHERE id = ${id}`);
}

/**
 * Acknowledges in one conditional UPDATE: a concurrent clear of the same row waits for it, then
 * re-reads the row and applies its own CASE to the new status, so ack + clear both land.
 */
export async function acknowledgeRow(db: Queryable, id: string): Promise<AlarmRow | undefined> {
  return one<AlarmRow>(
    db,
    withCols(sql`UPDATE alarms SET
          status = CASE status WHEN 'ACTIVE_UNACK' THEN 'ACTIVE_ACK' ELSE 'CLEARED_ACK' END,
          acknowledged_at = now(), updated_at = now()
        WHERE id = ${id} AND status IN ('ACTIVE_UNACK', 'CLEARED_UNACK')
        RETURNING {cols}`),
  );
}

/** Clears an active alarm (operator or rule), keeping its acknowledgement; same concurrency as acknowledgeRow. */
export async function clearRow(db: Queryable, id: string): Promise<AlarmRow | undefined> {
  return one<AlarmRow>(
    db,
    withCols(sql`UPDATE alarms SET
          status = CASE status WHEN 'ACTIVE_UNACK' THEN 'CLEARED_UNACK' ELSE 'CLEARED_ACK' END,
          cleared_at = now(), updated_at = now()
        WHERE id = ${id} AND status IN ('ACTIVE_UNACK', 'ACTIVE_ACK')
        RETURNING {cols}`),
  );
}

export interface AlarmDraft {
  operatorId: string;
  venueId: string;
  zoneId: string | null;
  integrationId: string | null;
  type: string;
  severity: string;
  message: string;
  details: Record<string, unknown>;
}

/**
 * Creates the active alarm of (source, type), or, when one is already active, updates it: the
 * unique partial index makes a second active alarm impossible whatever the concurrency.
 */
export async function upsertActiveAlarm(
  db: Queryable,
  d: AlarmDraft,
): Promise<{ row: AlarmRow; inserted: boolean; previousSeverity: string | null }> {
  const r = await one<AlarmRow & { inserted: boolean; previous_severity: string | null }>(
    db,
    withCols(sql`WITH prior AS (
          SELECT severity FROM alarms WHERE source_id = coalesce(${d.zoneId}::uuid, ${d.integrationId}::uuid) AND type = ${d.type} AND cleared_at IS NULL
        )
        INSERT INTO alarms (operator_id, venue_id, zone_id, integration_id, type, severity, message, details)
        VALUES (${d.operatorId}, ${d.venueId}, ${d.zoneId}, ${d.integrationId}, ${d.type}, ${d.severity}, ${d.message}, ${JSON.stringify(d.details)}::jsonb)
        ON CONFLICT (source_id, type) WHERE cleared_at IS NULL DO UPDATE SET
          severity = EXCLUDED.severity, message = EXCLUDED.message, details = EXCLUDED.details, updated_at = now()
        RETURNING {cols}, (xmax = 0) AS inserted, (SELECT severity FROM prior) AS previous_severity`),
  );
  const { inserted, previous_severity, ...row } = r!;
  return { row, inserted, previousSeverity: previous_severity };
}

/** Sets the figures (and, when it changes, the severity and message) of an active alarm. */
export async function reviseActiveAlarm(
  db: Queryable,
  id: string,
  severity: string,
  message: string,
  details: Record<string, unknown>,
): Promise<AlarmRow | undefined> {
  return one<AlarmRow>(
    db,
    withCols(sql`UPDATE alarms SET severity = ${severity}, message = ${message}, details = ${JSON.stringify(details)}::jsonb, updated_at = now()
        WHERE id = ${id} AND cleared_at IS NULL
        RETURNING {cols}`),
  );
}

export async function lockAlarm(db: Queryable, id: string): Promise<AlarmRow | undefined> {
  return one<AlarmRow>(db, withCols(sql`SELECT {cols} FROM alarms WHERE id = ${id} FOR UPDATE`));
}

/* Rule state */

export interface RuleStateRow {
  source_id: string;
  type: string;
  episode_alarm_id: string | null;
  pending: AlarmDraft | null;
  pending_since: Date | null;
  pending_due_at: Date | null;
  last_input: string | null;
  last_offset: number | null;
}

const STATE_COLUMNS = 'source_id, type, episode_alarm_id, pending, pending_since, pending_due_at, last_input, last_offset';

export async function ruleStateExists(db: Queryable, sourceId: string, type: string): Promise<boolean> {
  return (await one(db, sql`SELECT 1 FROM alarm_rule_state WHERE source_id = ${sourceId} AND type = ${type}`)) !== undefined;
}

/** The state row of (source, type), created when missing, locked until the transaction ends. */
export async function lockRuleState(db: Queryable, sourceId: string, type: string): Promise<RuleStateRow> {
  await exec(db, sql`INSERT INTO alarm_rule_state (source_id, type) VALUES (${sourceId}, ${type}) ON CONFLICT DO NOTHING`);
  return (await one<RuleStateRow>(db, {
    text: `SELECT ${STATE_COLUMNS} FROM alarm_rule_state WHERE source_id = $1 AND type = $2 FOR UPDATE`,
    values: [sourceId, type],
  }))!;
}

export interface RuleStateUpdate {
  episodeAlarmId: string | null;
  pending: AlarmDraft | null;
  pendingSince: Date | null;
  pendingDueAt: Date | null;
  lastInput: string | null;
  lastOffset: number | null;
}

export async function saveRuleState(db: Queryable, sourceId: string, type: string, s: RuleStateUpdate): Promise<void> {
  await exec(
    db,
    sql`UPDATE alarm_rule_state SET episode_alarm_id = ${s.episodeAlarmId}, pending = ${s.pending ? JSON.stringify(s.pending) : null}::jsonb,
          pending_since = ${s.pendingSince}, pending_due_at = ${s.pendingDueAt}, last_input = ${s.lastInput}, last_offset = ${s.lastOffset},
          updated_at = now()
        WHERE source_id = ${sourceId} AND type = ${type}`,
  );
}

/** Pending breaches whose minimum duration has passed, locked (rows another worker holds are skipped). */
export async function lockDueRuleStates(db: Queryable, limit: number): Promise<RuleStateRow[]> {
  return rows<RuleStateRow>(db, {
    text: `SELECT ${STATE_COLUMNS} FROM alarm_rule_state WHERE pending_due_at <= now()
           ORDER BY pending_due_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
    values: [limit],
  });
}

/* Sources of the rules */

export interface ZoneForRule {
  id: string;
  /** The venue's override of the occupancy rule, when it has one. */
  rule: unknown;
  name: string;
  capacity: number | null;
  is_active: boolean;
  venue_id: string;
  venue_active: boolean;
  operator_id: string;
}

export async function zoneForRule(db: Queryable, zoneId: string): Promise<ZoneForRule | undefined> {
  return one<ZoneForRule>(
    db,
    sql`SELECT z.id, z.name, z.capacity, z.is_active, z.venue_id, v.is_active AS venue_active, v.operator_id, r.occupancy AS rule
          FROM zones z JOIN venues v ON v.id = z.venue_id LEFT JOIN alarm_rules r ON r.venue_id = z.venue_id
         WHERE z.id = ${zoneId}`,
  );
}

export interface IntegrationForRule {
  id: string;
  venue_id: string;
  operator_id: string;
  connector_type: string;
  is_active: boolean;
}

export async function integrationForRule(db: Queryable, integrationId: string): Promise<IntegrationForRule | undefined> {
  return one<IntegrationForRule>(
    db,
    sql`SELECT i.id, i.venue_id, v.operator_id, i.connector_type, (i.is_active AND i.deleted_at IS NULL AND v.is_active) AS is_active
          FROM integrations i JOIN venues v ON v.id = i.venue_id WHERE i.id = ${integrationId}`,
  );
}

/* Outbox */

export async function insertOutbox(db: Queryable, venueId: string, event: unknown): Promise<number> {
  return (await one<{ id: number }>(
    db,
    sql`INSERT INTO alarm_outbox (venue_id, event) VALUES (${venueId}, ${JSON.stringify(event)}::jsonb) RETURNING id`,
  ))!.id;
}

export interface OutboxRow {
  id: number;
  venue_id: string;
  event: unknown;
}

/** Outbox rows by id, oldest first; `lock`: locked, skipping rows another publisher holds. */
export async function outboxRows(db: Queryable, ids: number[], opts: { lock?: boolean } = {}): Promise<OutboxRow[]> {
  const stmt = sql`SELECT id, venue_id, event FROM alarm_outbox WHERE id = ANY(${ids}::bigint[]) ORDER BY id`;
  return rows<OutboxRow>(db, opts.lock ? { text: `${stmt.text} FOR UPDATE SKIP LOCKED`, values: stmt.values } : stmt);
}

/** Outbox rows older than `olderThanMs`, oldest first, locked; rows another relay holds are skipped. */
export async function lockOldOutbox(db: Queryable, olderThanMs: number, limit: number): Promise<OutboxRow[]> {
  return rows<OutboxRow>(
    db,
    sql`SELECT id, venue_id, event FROM alarm_outbox
         WHERE created_at <= now() - make_interval(secs => ${olderThanMs / 1000})
         ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED`,
  );
}

export async function deleteOutbox(db: Queryable, ids: number[]): Promise<void> {
  await exec(db, sql`DELETE FROM alarm_outbox WHERE id = ANY(${ids}::bigint[])`);
}

/** Active alarms whose zone, integration or venue was deleted or deactivated. */
export async function orphanedAlarms(db: Queryable, limit: number): Promise<Array<{ id: string; source_id: string; type: string }>> {
  return rows(
    db,
    sql`SELECT a.id, a.source_id, a.type FROM alarms a
          JOIN venues v ON v.id = a.venue_id
          LEFT JOIN zones z ON z.id = a.zone_id
          LEFT JOIN integrations i ON i.id = a.integration_id
         WHERE a.cleared_at IS NULL
           AND (NOT v.is_active OR NOT coalesce(z.is_active, true) OR NOT coalesce(i.is_active AND i.deleted_at IS NULL, true))
         LIMIT ${limit}`,
  );
}

/** Forgets a rule's episode and pending breach (its source is gone). */
export async function deleteRuleState(db: Queryable, sourceId: string, type: string): Promise<void> {
  await exec(db, sql`DELETE FROM alarm_rule_state WHERE source_id = ${sourceId} AND type = ${type}`);
}

/* Per-venue rule overrides */

export async function venueAlarmRule(db: Queryable, venueId: string): Promise<{ occupancy: unknown; updated_at: Date } | undefined> {
  return one(db, sql`SELECT occupancy, updated_at FROM alarm_rules WHERE venue_id = ${venueId}`);
}

export async function upsertVenueAlarmRule(db: Queryable, venueId: string, occupancy: unknown): Promise<{ updated_at: Date }> {
  return (await one<{ updated_at: Date }>(
    db,
    sql`INSERT INTO alarm_rules (venue_id, occupancy) VALUES (${venueId}, ${JSON.stringify(occupancy)}::jsonb)
        ON CONFLICT (venue_id) DO UPDATE SET occupancy = EXCLUDED.occupancy, updated_at = now()
        RETURNING updated_at`,
  ))!;
}

export async function deleteVenueAlarmRule(db: Queryable, venueId: string): Promise<void> {
  await exec(db, sql`DELETE FROM alarm_rules WHERE venue_id = ${venueId}`);
}
