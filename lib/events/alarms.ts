import { z } from 'zod';
import { epochMs } from './vocabulary.js';
import { decodeJson, encodeJson } from './wire.js';

/*
 * Alarms (docs/alarms.md): every change of an alarm (created by a rule, severity changed by a
 * rule, acknowledged by an operator, cleared by a rule or an operator) is one AlarmEvent on the
 * alarms topic, keyed by venue id. Delivery is at least once: `id` identifies an event, and
 * `alarm.updatedAt` orders the states of one alarm.
 */

export const ALARM_SEVERITIES = ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING'] as const;
export type AlarmSeverity = (typeof ALARM_SEVERITIES)[number];
export const ALARM_STATUSES = ['ACTIVE_UNACK', 'ACTIVE_ACK', 'CLEARED_UNACK', 'CLEARED_ACK'] as const;
export type AlarmStatus = (typeof ALARM_STATUSES)[number];
export const ALARM_EVENT_KINDS = ['created', 'severity_changed', 'acknowledged', 'cleared'] as const;
export type AlarmEventKind = (typeof ALARM_EVENT_KINDS)[number];

const isoTime = z.iso.datetime();

/** The alarm as the API shows it (spec: Alarm), plus integrationId (connector alarms have no zone) and updatedAt. */
export const alarmSchema = z.object({
  id: z.uuid(),
  venueId: z.uuid(),
  zoneId: z.uuid().nullable(),
  integrationId: z.uuid().nullable(),
  type: z.string(),
  severity: z.enum(ALARM_SEVERITIES),
  status: z.enum(ALARM_STATUSES),
  message: z.string(),
  details: z.record(z.string(), z.unknown()),
  createdAt: isoTime,
  updatedAt: isoTime,
  acknowledgedAt: isoTime.nullable(),
  clearedAt: isoTime.nullable(),
});
export type AlarmView = z.infer<typeof alarmSchema>;

export const alarmEventSchema = z.object({
  id: z.uuid(),
  kind: z.enum(ALARM_EVENT_KINDS),
  /** `rule`: the alarm rules; `operator`: an API call (ack, clear). */
  cause: z.enum(['rule', 'operator']),
  operatorId: z.uuid(),
  venueId: z.uuid(),
  /** The severity before a `severity_changed`, else null. */
  previousSeverity: z.enum(ALARM_SEVERITIES).nullable(),
  /** When the change was made, epoch ms. */
  ts: epochMs,
  /** The alarm after the change. */
  alarm: alarmSchema,
});
export type AlarmEvent = z.infer<typeof alarmEventSchema>;

export const encodeAlarmEvent = (e: AlarmEvent): Buffer => encodeJson(e);
export const decodeAlarmEvent = (value: Buffer | null): AlarmEvent => decodeJson(alarmEventSchema, value);
