import type { AlarmSeverity, AlarmStatus, AlarmView } from '../../lib/events/alarms.js';
import { conflict, forbidden, notFound } from '../../lib/errors.js';
import { transaction, type Db } from '../../postgres/client.js';
import { acknowledgeRow, alarmOwner, clearRow, listAlarmRows, type AlarmRow } from '../../postgres/queries/alarms.js';
import { ownedVenue } from '../venues/access.js';
import { alarmView, publishSoon, recordAlarmEvent, type AlarmEventBus } from './events.js';

export interface AlarmListQuery {
  status?: AlarmStatus;
  severity?: AlarmSeverity;
  venue_id?: string;
  limit: number;
  offset: number;
}

/** The caller's alarms, newest first; a venue filter must name one of the caller's active venues. */
export async function listAlarms(
  db: Db,
  operatorId: string,
  q: AlarmListQuery,
): Promise<{ alarms: AlarmView[]; total: number; limit: number; offset: number }> {
  if (q.venue_id) await ownedVenue(db, operatorId, q.venue_id);
  const { rows, total } = await listAlarmRows(db, operatorId, { status: q.status, severity: q.severity, venueId: q.venue_id }, q);
  return { alarms: rows.map(alarmView), total, limit: q.limit, offset: q.offset };
}

async function ownedAlarm(db: Db, operatorId: string, id: string): Promise<void> {
  const owner = await alarmOwner(db, id);
  if (!owner) throw notFound('alarm');
  if (owner.operator_id !== operatorId) throw forbidden('this alarm belongs to another operator');
}

/**
 * One transition of the spec's table, as a single conditional UPDATE plus its event in one
 * transaction; when the UPDATE matches nothing the alarm was already in the target state, and the
 * 409 names the status it is in now.
 */
async function transition(db: Db, bus: AlarmEventBus, operatorId: string, id: string, kind: 'acknowledged' | 'cleared'): Promise<AlarmRow> {
  await ownedAlarm(db, operatorId, id);
  const done = await transaction(db, async (c) => {
    const row = kind === 'acknowledged' ? await acknowledgeRow(c, id) : await clearRow(c, id);
    return row ? { row, eventId: await recordAlarmEvent(c, kind, 'operator', row) } : undefined;
  });
  if (!done) {
    const status = (await alarmOwner(db, id))?.status;
    throw kind === 'acknowledged'
      ? conflict('ALREADY_ACKNOWLEDGED', `alarm is already acknowledged: its status is ${status}`, { status })
      : conflict('ALREADY_CLEARED', `alarm is already cleared: its status is ${status}`, { status });
  }
  publishSoon(db, bus, [done.eventId]);
  return done.row;
}

export async function acknowledgeAlarm(db: Db, bus: AlarmEventBus, operatorId: string, id: string) {
  const row = await transition(db, bus, operatorId, id, 'acknowledged');
  return { id: row.id, status: row.status as AlarmStatus, acknowledgedAt: row.acknowledged_at!.toISOString() };
}

export async function clearAlarm(db: Db, bus: AlarmEventBus, operatorId: string, id: string) {
  const row = await transition(db, bus, operatorId, id, 'cleared');
  return { id: row.id, status: row.status as AlarmStatus, clearedAt: row.cleared_at!.toISOString() };
}
