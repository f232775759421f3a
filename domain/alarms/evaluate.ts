import type { AlarmSeverity } from '../../lib/events/alarms.js';
import type { ConnectorHealthChange, OccupancyUpdate } from '../../lib/events/derived.js';
import { transaction, type Db, type Queryable } from '../../postgres/client.js';
import {
  clearRow,
  deleteRuleState,
  integrationForRule,
  lockAlarm,
  lockDueRuleStates,
  lockRuleState,
  orphanedAlarms,
  reviseActiveAlarm,
  ruleStateExists,
  saveRuleState,
  upsertActiveAlarm,
  zoneForRule,
  type AlarmDraft,
  type RuleStateRow,
} from '../../postgres/queries/alarms.js';
import { recordAlarmEvent } from './events.js';
import {
  clearBelow,
  connectorSeverity,
  CONNECTOR_HEALTH_TYPE,
  decide,
  occupancySeverity,
  ruleOf,
  ZONE_OCCUPANCY_TYPE,
  type OccupancyRule,
  type OccupancySettings,
} from './rules.js';

/**
 * Applies the rules to one input (docs/alarms.md). Everything about one (source, type) happens in
 * one Postgres transaction holding its rule-state row locked, so inputs about one zone or
 * integration are applied one at a time whoever sends them, and the unique index over active
 * alarms makes a second active alarm impossible anyway. The state row also records the last input
 * applied (topic:partition and offset): an input replayed after a crash is skipped.
 *
 * Each function returns the outbox ids of the alarm events it recorded, to publish after the commit.
 */

/** Where an input came from; null for inputs without a position (nothing to de-duplicate). */
export interface InputPosition {
  input: string;
  offset: number;
}

interface Subject {
  sourceId: string;
  type: string;
  ts: number;
  minDurationMs: number;
  /** The severity the input calls for, given the severity of the alarm or pending breach (hysteresis). */
  target(current: AlarmSeverity | null): AlarmSeverity | null;
  draft(severity: AlarmSeverity): AlarmDraft;
}

async function applyInput(db: Db, s: Subject, at: InputPosition | null): Promise<number[]> {
  // Most inputs concern a quiet zone or a healthy connector: no state, nothing to do, no write.
  if (s.target(null) === null && !(await ruleStateExists(db, s.sourceId, s.type))) return [];
  return transaction(db, async (c) => {
    const state = await lockRuleState(c, s.sourceId, s.type);
    if (at && state.last_input === at.input && state.last_offset !== null && state.last_offset >= at.offset) return [];
    const episode = state.episode_alarm_id ? await lockAlarm(c, state.episode_alarm_id) : undefined;
    const pendingSeverity = (state.pending?.severity as AlarmSeverity | undefined) ?? null;
    const current = (episode?.severity as AlarmSeverity | undefined) ?? pendingSeverity;
    const target = s.target(current);
    const action = decide(
      {
        alarm: episode ? { severity: episode.severity as AlarmSeverity, active: episode.cleared_at === null } : null,
        pendingSince: state.pending_since?.getTime() ?? null,
      },
      target,
      s.ts,
      s.minDurationMs,
      Date.now(),
    );
    const ids: number[] = [];
    let next = {
      episodeAlarmId: state.episode_alarm_id,
      pending: state.pending,
      pendingSince: state.pending_since,
      pendingDueAt: state.pending_due_at,
    };
    switch (action.do) {
      case 'none':
        break;
      case 'raise': {
        const id = await raise(c, s.draft(action.severity), ids);
        next = { episodeAlarmId: id, pending: null, pendingSince: null, pendingDueAt: null };
        break;
      }
      case 'pend':
        next = { ...next, pending: s.draft(action.severity), pendingSince: new Date(action.since), pendingDueAt: new Date(action.dueAt) };
        break;
      case 'revise': {
        const d = s.draft(action.severity);
        // At the same severity the alarm keeps the message and figures it was raised with (a
        // WARNING raised at 82 % must not read "at 78 %; WARNING from 80 %" on the way down);
        // the newest figures go beside them. A severity change re-words it.
        const same = d.severity === episode!.severity;
        const details = same ? { ...episode!.details, latest: latestOf(d.details) } : { ...d.details, latest: latestOf(d.details) };
        const row = await reviseActiveAlarm(c, episode!.id, d.severity, same ? episode!.message : d.message, details);
        if (row && row.severity !== episode!.severity)
          ids.push(await recordAlarmEvent(c, 'severity_changed', 'rule', row, episode!.severity as AlarmSeverity));
        break;
      }
      case 'clear': {
        const row = await clearRow(c, episode!.id);
        if (row) ids.push(await recordAlarmEvent(c, 'cleared', 'rule', row));
        next = { episodeAlarmId: null, pending: null, pendingSince: null, pendingDueAt: null };
        break;
      }
      case 'end':
        next = { episodeAlarmId: null, pending: null, pendingSince: null, pendingDueAt: null };
        break;
    }
    await saveRuleState(c, s.sourceId, s.type, {
      ...next,
      lastInput: at?.input ?? state.last_input,
      lastOffset: at?.offset ?? state.last_offset,
    });
    return ids;
  });
}

/** Creates the active alarm (or, should one exist, updates it); returns its id. */
async function raise(c: Queryable, draft: AlarmDraft, ids: number[]): Promise<string> {
  const { row, inserted, previousSeverity } = await upsertActiveAlarm(c, draft);
  if (inserted) ids.push(await recordAlarmEvent(c, 'created', 'rule', row));
  else if (previousSeverity !== row.severity)
    ids.push(await recordAlarmEvent(c, 'severity_changed', 'rule', row, previousSeverity as AlarmSeverity));
  return row.id;
}

const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

/**
 * An occupancy update of a zone. The capacity is the zone's current one in Postgres (a zone edited
 * since the update was made counts with its new capacity); a zone without a capacity, deleted, or
 * of a deleted venue raises nothing and clears what it had. Venue-wide updates carry no capacity.
 * The thresholds are the venue's own when it set them, else `defaultRule`.
 */
export async function evaluateOccupancy(
  db: Db,
  defaultRule: OccupancyRule,
  u: OccupancyUpdate,
  at: InputPosition | null,
): Promise<number[]> {
  if (!u.zoneId) return [];
  const zone = await zoneForRule(db, u.zoneId);
  if (!zone || zone.venue_id !== u.venueId) return [];
  // The venue's override, checked when it was set (domain/alarms/rule-settings.ts).
  const rule = zone.rule ? ruleOf(zone.rule as OccupancySettings) : defaultRule;
  const capacity = zone.is_active && zone.venue_active && zone.capacity ? zone.capacity : null;
  const percent = capacity ? (u.value / capacity) * 100 : null;
  return applyInput(
    db,
    {
      sourceId: zone.id,
      type: ZONE_OCCUPANCY_TYPE,
      ts: u.ts,
      minDurationMs: rule.minDurationMs,
      target: (current) => (percent === null ? null : occupancySeverity(rule, percent, current).severity),
      draft: (severity) => {
        const threshold = rule.levels.find((l) => l.severity === severity)?.percent ?? null;
        return {
          operatorId: zone.operator_id,
          venueId: zone.venue_id,
          zoneId: zone.id,
          integrationId: null,
          type: ZONE_OCCUPANCY_TYPE,
          severity,
          message: `Zone "${zone.name}" at ${round(percent ?? 0)}% of capacity (${u.value} of ${capacity}); ${severity} from ${threshold}%`,
          details: {
            current: u.value,
            capacity,
            percent: round(percent ?? 0, 2),
            threshold,
            clearBelow: clearBelow(rule),
            zoneName: zone.name,
            observedAt: new Date(u.ts).toISOString(),
          },
        };
      },
    },
    at,
  );
}

/** A connector's health change: degraded or offline raises (or changes) its alarm, healthy clears it. */
export async function evaluateConnectorHealth(db: Db, h: ConnectorHealthChange, at: InputPosition | null): Promise<number[]> {
  const integration = await integrationForRule(db, h.integrationId);
  if (!integration || integration.venue_id !== h.venueId) return [];
  const severity = integration.is_active ? connectorSeverity(h.status) : null;
  return applyInput(
    db,
    {
      sourceId: integration.id,
      type: CONNECTOR_HEALTH_TYPE,
      ts: h.ts,
      minDurationMs: 0,
      target: () => severity,
      draft: (sev) => ({
        operatorId: integration.operator_id,
        venueId: integration.venue_id,
        zoneId: null,
        integrationId: integration.id,
        type: CONNECTOR_HEALTH_TYPE,
        severity: sev,
        message: `${integration.connector_type} connector ${h.status}: ${h.reason || 'no reason given'}`,
        details: {
          status: h.status,
          previousStatus: h.previous,
          connectorType: integration.connector_type,
          lastEventAt: h.lastEventAt === null ? null : new Date(h.lastEventAt).toISOString(),
          rejectionRate: h.rejectionRate,
          reason: h.reason,
          observedAt: new Date(h.ts).toISOString(),
        },
      }),
    },
    at,
  );
}

/**
 * Raises the pending breaches whose minimum duration has passed with no input ending them (the
 * figures have not changed since, or an input would have ended the breach). Safe to run in every
 * rule-consumer member at once: rows are locked, and skipped when held elsewhere.
 */
export async function raiseDueAlarms(db: Db, limit = 100): Promise<number[]> {
  return transaction(db, async (c) => {
    const due: RuleStateRow[] = await lockDueRuleStates(c, limit);
    const ids: number[] = [];
    for (const s of due) {
      let episode = s.episode_alarm_id;
      if (s.pending) episode = await raise(c, s.pending, ids);
      await saveRuleState(c, s.source_id, s.type, {
        episodeAlarmId: episode,
        pending: null,
        pendingSince: null,
        pendingDueAt: null,
        lastInput: s.last_input,
        lastOffset: s.last_offset,
      });
    }
    return ids;
  });
}

/**
 * Clears the active alarms of deleted zones, integrations and venues (no input will ever clear
 * them), as a rule clear: ACTIVE_UNACK → CLEARED_UNACK, ACTIVE_ACK → CLEARED_ACK.
 */
export async function clearOrphanedAlarms(db: Db, limit = 100): Promise<number[]> {
  return transaction(db, async (c) => {
    const ids: number[] = [];
    for (const orphan of await orphanedAlarms(c, limit)) {
      // Locks in the order inputs take them (rule state, then alarm), so the two never deadlock.
      await lockRuleState(c, orphan.source_id, orphan.type);
      const row = await clearRow(c, orphan.id);
      if (row) ids.push(await recordAlarmEvent(c, 'cleared', 'rule', row));
      await deleteRuleState(c, orphan.source_id, orphan.type);
    }
    return ids;
  });
}

/** The changing figures of a draft's details (not the raise's settings and names), for `details.latest`. */
function latestOf(details: Record<string, unknown>): Record<string, unknown> {
  const { threshold: _t, clearBelow: _c, zoneName: _z, connectorType: _k, previousStatus: _p, latest: _l, ...figures } = details;
  return figures;
}
