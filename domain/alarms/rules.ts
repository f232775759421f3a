import type { AlarmSeverity } from '../../lib/events/alarms.js';
import type { ConnectorHealth } from '../../lib/events/derived.js';

/**
 * The alarm rules as plain functions (docs/alarms.md): which severity an input calls for, given
 * the severity of the alarm already active. No I/O here; evaluate.ts applies the verdicts.
 */

export const ZONE_OCCUPANCY_TYPE = 'zone_occupancy_high';
export const CONNECTOR_HEALTH_TYPE = 'connector_unhealthy';

/** Lowest first. */
const SEVERITY_ORDER: readonly AlarmSeverity[] = ['WARNING', 'MINOR', 'MAJOR', 'CRITICAL'];
export const severityRank = (s: AlarmSeverity): number => SEVERITY_ORDER.indexOf(s);

export interface OccupancyRule {
  /** Percent of capacity at or above which each severity holds, lowest first. */
  levels: ReadonlyArray<{ severity: AlarmSeverity; percent: number }>;
  /** Percentage points below a level's threshold the value must fall before that level is left. */
  hysteresis: number;
  /** How long a breach must last before an alarm is raised (0: at once). Escalation is always at once. */
  minDurationMs: number;
}

export const DEFAULT_OCCUPANCY_RULE: OccupancyRule = {
  levels: [
    { severity: 'WARNING', percent: 80 },
    { severity: 'MAJOR', percent: 90 },
    { severity: 'CRITICAL', percent: 100 },
  ],
  hysteresis: 5,
  minDurationMs: 0,
};

/** A venue's occupancy rule as operators set it (GET/PUT /api/venues/{id}/alarm-rules). */
export interface OccupancySettings {
  warning_percent: number;
  major_percent: number;
  critical_percent: number;
  hysteresis_points: number;
  min_duration_seconds: number;
}

export function settingsOf(rule: OccupancyRule): OccupancySettings {
  const at = (severity: AlarmSeverity) => rule.levels.find((l) => l.severity === severity)!.percent;
  return {
    warning_percent: at('WARNING'),
    major_percent: at('MAJOR'),
    critical_percent: at('CRITICAL'),
    hysteresis_points: rule.hysteresis,
    min_duration_seconds: rule.minDurationMs / 1000,
  };
}

export function ruleOf(s: OccupancySettings): OccupancyRule {
  return {
    levels: [
      { severity: 'WARNING', percent: s.warning_percent },
      { severity: 'MAJOR', percent: s.major_percent },
      { severity: 'CRITICAL', percent: s.critical_percent },
    ],
    hysteresis: s.hysteresis_points,
    minDurationMs: s.min_duration_seconds * 1000,
  };
}

/** What is wrong with a set of settings, field by field (empty: valid). */
export function settingsProblems(s: OccupancySettings): Array<{ field: string; message: string }> {
  const problems: Array<{ field: string; message: string }> = [];
  if (s.major_percent <= s.warning_percent)
    problems.push({ field: 'zone_occupancy.major_percent', message: `must be above warning_percent (${s.warning_percent})` });
  if (s.critical_percent <= s.major_percent)
    problems.push({ field: 'zone_occupancy.critical_percent', message: `must be above major_percent (${s.major_percent})` });
  if (s.hysteresis_points >= s.warning_percent) {
    problems.push({
      field: 'zone_occupancy.hysteresis_points',
      message: `must be below warning_percent (${s.warning_percent}), or the alarm could never clear`,
    });
  }
  return problems;
}

export interface OccupancyVerdict {
  severity: AlarmSeverity | null;
  /** The threshold of that severity, percent of capacity. */
  threshold: number | null;
}

/**
 * The severity an occupancy calls for. Without an active alarm, the highest level reached. With
 * one at severity `current`, a level at or below it holds until the value falls `hysteresis`
 * points below that level's threshold; a higher level is taken at once.
 */
export function occupancySeverity(rule: OccupancyRule, percent: number, current: AlarmSeverity | null): OccupancyVerdict {
  let best: { severity: AlarmSeverity; percent: number } | null = null;
  for (const level of rule.levels) {
    const holds = current !== null && severityRank(level.severity) <= severityRank(current) && percent >= level.percent - rule.hysteresis;
    if (percent >= level.percent || holds) best = level;
  }
  return best ? { severity: best.severity, threshold: best.percent } : { severity: null, threshold: null };
}

/** The percentage the alarm of `rule` clears below. */
export const clearBelow = (rule: OccupancyRule): number => (rule.levels[0]?.percent ?? 0) - rule.hysteresis;

/** Connector health → severity: degraded MINOR, offline MAJOR, healthy and waiting (a new integration's grace) none. */
export function connectorSeverity(status: ConnectorHealth): AlarmSeverity | null {
  if (status === 'offline') return 'MAJOR';
  if (status === 'degraded') return 'MINOR';
  return null;
}

/** Where a rule's episode stands before an input is applied. */
export interface EpisodeState {
  /** The alarm raised for the current breach, and whether it is still active (an operator may have cleared it). */
  alarm: { severity: AlarmSeverity; active: boolean } | null;
  /** A breach waiting out its minimum duration: since when (epoch ms). */
  pendingSince: number | null;
}

export type Action =
  | { do: 'none' }
  | { do: 'raise'; severity: AlarmSeverity }
  /** `dueAt` is wall-clock time for the timer; `since` is event time. */
  | { do: 'pend'; severity: AlarmSeverity; since: number; dueAt: number }
  | { do: 'revise'; severity: AlarmSeverity }
  | { do: 'clear' }
  /** The breach ended: forget the episode (and any pending breach); nothing active to clear. */
  | { do: 'end' };

/**
 * What to do with a target severity (null: the condition does not hold) observed at `ts`.
 * - active alarm: clear it when the condition ended, otherwise revise it (severity, figures);
 * - alarm cleared by an operator while the breach goes on: nothing, unless the severity rises above
 *   the cleared one (a new alarm); the episode ends when the condition does;
 * - no alarm: raise, or wait out the minimum duration (kept across restarts by the caller).
 * The timer's deadline is the remaining duration counted from `now`, when the rule sees the input:
 * an input read late (a backlog, a replay) still leaves the inputs after it time to end the breach.
 */
export function decide(state: EpisodeState, target: AlarmSeverity | null, ts: number, minDurationMs: number, now: number): Action {
  const { alarm } = state;
  if (target === null) {
    if (alarm?.active) return { do: 'clear' };
    return alarm || state.pendingSince !== null ? { do: 'end' } : { do: 'none' };
  }
  if (alarm?.active) return { do: 'revise', severity: target };
  if (alarm && severityRank(target) <= severityRank(alarm.severity)) return { do: 'none' };
  if (minDurationMs <= 0) return { do: 'raise', severity: target };
  const since = state.pendingSince ?? ts;
  if (ts - since >= minDurationMs) return { do: 'raise', severity: target };
  return { do: 'pend', severity: target, since, dueAt: now + (since + minDurationMs - ts) };
}
