import { randomUUID } from 'node:crypto';
import type { Logger } from '../../lib/logger.js';
import type { Publisher } from '../../lib/kafka.js';
import {
  encodeAlarmEvent,
  type AlarmEvent,
  type AlarmEventKind,
  type AlarmSeverity,
  type AlarmStatus,
  type AlarmView,
} from '../../lib/events/alarms.js';
import { transaction, type Db, type Queryable } from '../../postgres/client.js';
import { deleteOutbox, insertOutbox, lockOldOutbox, outboxRows, type AlarmRow, type OutboxRow } from '../../postgres/queries/alarms.js';

/** Where alarm events go: the alarms topic (lib/topology.ts), through a publisher that waits for acks. */
export interface AlarmEventBus {
  publisher: Publisher;
  topic: string;
  log: Logger;
}

export function alarmView(r: AlarmRow): AlarmView {
  return {
    id: r.id,
    venueId: r.venue_id,
    zoneId: r.zone_id,
    integrationId: r.integration_id,
    type: r.type,
    severity: r.severity as AlarmSeverity,
    status: r.status as AlarmStatus,
    message: r.message,
    details: r.details,
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
    acknowledgedAt: r.acknowledged_at?.toISOString() ?? null,
    clearedAt: r.cleared_at?.toISOString() ?? null,
  };
}

/** Records the event of a change in the transaction making it; returns the outbox id to publish after the commit. */
export async function recordAlarmEvent(
  db: Queryable,
  kind: AlarmEventKind,
  cause: AlarmEvent['cause'],
  row: AlarmRow,
  previousSeverity: AlarmSeverity | null = null,
): Promise<number> {
  const event: AlarmEvent = {
    id: randomUUID(),
    kind,
    cause,
    operatorId: row.operator_id,
    venueId: row.venue_id,
    previousSeverity,
    ts: Date.now(),
    alarm: alarmView(row),
  };
  return insertOutbox(db, row.venue_id, event);
}

const BATCH = 500;

const toMessages = (batch: OutboxRow[]) => batch.map((r) => ({ key: r.venue_id, value: encodeAlarmEvent(r.event as AlarmEvent) }));

/**
 * Publishes the events just recorded (outbox ids), keyed by venue, and deletes them once Kafka
 * acknowledged them. `hold`: the rows stay locked meanwhile, so the relay cannot send them too
 * (the rule consumer, whose own connections these are). Without it no Postgres connection is held
 * while Kafka answers (the api: a dead broker must not exhaust its pool); the relay leaves rows
 * younger than its delay alone, which outlasts the publisher's deadline.
 */
export async function publishAlarmEvents(db: Db, bus: AlarmEventBus, ids: number[], opts: { hold?: boolean } = {}): Promise<void> {
  if (ids.length === 0) return;
  const send = async (q: Queryable, batch: OutboxRow[]) => {
    if (batch.length === 0) return;
    await bus.publisher.publish([{ topic: bus.topic, messages: toMessages(batch) }]);
    await deleteOutbox(
      q,
      batch.map((r) => r.id),
    );
  };
  if (opts.hold) await transaction(db, async (c) => send(c, await outboxRows(c, ids, { lock: true })));
  else await send(db, await outboxRows(db, ids));
}

/**
 * Relays the outbox rows older than `olderThanMs` (their writer crashed, or Kafka was away),
 * oldest first. Rows are locked meanwhile, so two relays never send the same row; a crash between
 * the ack and the delete sends it again (at least once: events carry their id).
 */
export async function relayAlarmEvents(db: Db, bus: AlarmEventBus, olderThanMs: number): Promise<number> {
  let sent = 0;
  for (;;) {
    const n = await transaction(db, async (c) => {
      const batch = await lockOldOutbox(c, olderThanMs, BATCH);
      if (batch.length === 0) return 0;
      await bus.publisher.publish([{ topic: bus.topic, messages: toMessages(batch) }]);
      await deleteOutbox(
        c,
        batch.map((r) => r.id),
      );
      return batch.length;
    });
    sent += n;
    if (n < BATCH) return sent;
  }
}

/** Publishes after a commit without holding up the caller; what fails stays in the outbox for the relay. */
export function publishSoon(db: Db, bus: AlarmEventBus, ids: number[]): void {
  if (ids.length === 0) return;
  publishAlarmEvents(db, bus, ids).catch((err: unknown) =>
    bus.log.warn({ err, events: ids.length }, 'alarm events not published yet; the outbox relay sends them later'),
  );
}
