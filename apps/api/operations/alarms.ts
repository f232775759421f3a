import { z } from 'zod';
import { acknowledgeAlarm, clearAlarm, listAlarms } from '../../../domain/alarms/alarms.js';
import type { AlarmEventBus } from '../../../domain/alarms/events.js';
import { getVenueAlarmRules, resetVenueAlarmRules, setVenueAlarmRules } from '../../../domain/alarms/rule-settings.js';
import { alarmTopicName } from '../../../lib/topology.js';
import { ALARM_SEVERITIES, ALARM_STATUSES, alarmSchema } from '../../../lib/events/alarms.js';
import { operation, type BearerContext } from './operation.js';
import { pageQuery, timestamp, uuid, VENUE_ERRORS, venueParams } from './schemas.js';

const alarmParams = z.object({ id: uuid() });

const listQuery = pageQuery.extend({
  status: z.enum(ALARM_STATUSES).optional().describe('only alarms in this status'),
  severity: z.enum(ALARM_SEVERITIES).optional().describe('only alarms of this severity'),
  venue_id: uuid().optional().describe("only alarms of this venue (one of the caller's active venues)"),
});

const alarmList = z.object({ alarms: z.array(alarmSchema), total: z.number().int(), limit: z.number().int(), offset: z.number().int() });

const percent = (what: string) => z.number().gt(0).max(1000).describe(`${what}, percent of the zone's capacity`);
const occupancySettings = z.strictObject({
  warning_percent: percent('WARNING from'),
  major_percent: percent('MAJOR from'),
  critical_percent: percent('CRITICAL from'),
  hysteresis_points: z.number().min(0).max(100).describe('percentage points below a threshold the value must fall to leave that level'),
  min_duration_seconds: z.number().int().min(0).max(3600).describe('how long a breach must last before an alarm is raised (0: at once)'),
});
const alarmRules = z.object({
  venue_id: z.uuid(),
  zone_occupancy: occupancySettings,
  is_default: z.boolean(),
  updated_at: timestamp.nullable(),
});
const alarmRulesBody = z.strictObject({
  zone_occupancy: occupancySettings.partial().refine((o) => Object.values(o).some((v) => v !== undefined), 'send at least one setting'),
});

const busOf = ({ deps, log }: BearerContext): AlarmEventBus => ({
  publisher: deps.services.publisher,
  topic: alarmTopicName(deps.services.cfg.KAFKA_TOPIC_PREFIX),
  log,
});

export const alarmOperations = [
  operation({
    id: 'listAlarms',
    method: 'get',
    path: '/api/alarms',
    summary: "The caller's alarms, newest first, filtered by status, severity and venue (limit above 200 is a 400)",
    tag: 'Alarms',
    auth: 'bearer',
    query: listQuery,
    response: { status: 200, description: 'A page of alarms and the total matching the filters', schema: alarmList },
    errors: [400, 401, 403, 404, 429],
    tool: {
      name: 'list_alarms',
      description:
        "Lists the caller's alarms, newest first. An alarm is raised by a rule: type zone_occupancy_high (a zone's live occupancy against its capacity: by default WARNING >= 80%, MAJOR >= 90%, CRITICAL >= 100%, clearing below 75%; a venue's own thresholds: get_alarm_rules) or connector_unhealthy (an integration degraded: MINOR, offline: MAJOR; it clears when healthy). status is ACTIVE_UNACK, ACTIVE_ACK (condition still on), CLEARED_UNACK or CLEARED_ACK (condition over); details holds the figures (current people, capacity, percent, threshold; or the connector's status and lastEventAt). Filters: status, severity (CRITICAL, MAJOR, MINOR, WARNING), venue_id; paging: limit 1-200 (default 50), offset. Times are UTC ISO 8601.",
    },
    handler: ({ query }, { deps, operator }) => listAlarms(deps.services.db, operator.id, query),
  }),
  operation({
    id: 'acknowledgeAlarm',
    method: 'post',
    path: '/api/alarms/{id}/ack',
    summary: 'Acknowledge an alarm: ACTIVE_UNACK → ACTIVE_ACK, CLEARED_UNACK → CLEARED_ACK; 409 ALREADY_ACKNOWLEDGED otherwise',
    tag: 'Alarms',
    auth: 'bearer',
    params: alarmParams,
    response: {
      status: 200,
      description: 'The alarm is acknowledged',
      schema: z.object({ id: z.uuid(), status: z.enum(['ACTIVE_ACK', 'CLEARED_ACK']), acknowledgedAt: timestamp }),
    },
    errors: [400, 401, 403, 404, 409, 429],
    handler: ({ params }, ctx) => acknowledgeAlarm(ctx.deps.services.db, busOf(ctx), ctx.operator.id, params.id),
  }),
  operation({
    id: 'clearAlarm',
    method: 'post',
    path: '/api/alarms/{id}/clear',
    summary: 'Clear an alarm: ACTIVE_UNACK → CLEARED_UNACK, ACTIVE_ACK → CLEARED_ACK; 409 ALREADY_CLEARED otherwise',
    tag: 'Alarms',
    auth: 'bearer',
    params: alarmParams,
    response: {
      status: 200,
      description: 'The alarm is cleared',
      schema: z.object({ id: z.uuid(), status: z.enum(['CLEARED_UNACK', 'CLEARED_ACK']), clearedAt: timestamp }),
    },
    errors: [400, 401, 403, 404, 409, 429],
    handler: ({ params }, ctx) => clearAlarm(ctx.deps.services.db, busOf(ctx), ctx.operator.id, params.id),
  }),
  operation({
    id: 'getVenueAlarmRules',
    method: 'get',
    path: '/api/venues/{id}/alarm-rules',
    summary: "The venue's zone occupancy alarm thresholds, hysteresis and minimum duration (the defaults unless it set its own)",
    tag: 'Alarms',
    auth: 'bearer',
    params: venueParams,
    response: { status: 200, description: 'The rules in force for the venue', schema: alarmRules },
    errors: VENUE_ERRORS,
    tool: {
      name: 'get_alarm_rules',
      description:
        "The zone occupancy alarm rule of one venue: the percentages of a zone's capacity at which a WARNING, MAJOR and CRITICAL alarm is raised, the hysteresis in percentage points (a level is left only that far below its threshold; the alarm clears below warning_percent minus it), and the minimum duration in seconds a breach must last before an alarm is raised. is_default tells whether the venue uses the platform defaults.",
      rename: { id: 'venue_id' },
    },
    handler: ({ params }, { deps, operator }) => getVenueAlarmRules(deps.services.db, operator.id, params.id),
  }),
  operation({
    id: 'setVenueAlarmRules',
    method: 'put',
    path: '/api/venues/{id}/alarm-rules',
    summary:
      "Change any subset of the venue's occupancy rule; warning < major < critical and hysteresis < warning, else a 400. Applies from the next occupancy update",
    tag: 'Alarms',
    auth: 'bearer',
    params: venueParams,
    body: alarmRulesBody,
    response: { status: 200, description: 'The rules now in force', schema: alarmRules },
    errors: VENUE_ERRORS,
    handler: ({ params, body }, { deps, operator }) => setVenueAlarmRules(deps.services.db, operator.id, params.id, body),
  }),
  operation({
    id: 'resetVenueAlarmRules',
    method: 'delete',
    path: '/api/venues/{id}/alarm-rules',
    summary: 'Back to the default occupancy rule',
    tag: 'Alarms',
    auth: 'bearer',
    params: venueParams,
    response: { status: 200, description: 'The defaults, now in force', schema: alarmRules },
    errors: VENUE_ERRORS,
    handler: ({ params }, { deps, operator }) => resetVenueAlarmRules(deps.services.db, operator.id, params.id),
  }),
];
