import { storedOffsets } from '../../clickhouse/queries/events.js';
import { insertHealth, insertOccupancy, type HealthRow, type OccupancyRow } from '../../clickhouse/queries/derived.js';
import { decodeConnectorHealthChange, decodeOccupancyUpdate } from '../../lib/events/derived.js';
import { dayString, localDayNumber } from '../../domain/telemetry/calendar.js';
import type { SinkTarget } from './sink.js';

/**
 * The processors' output topics → their ClickHouse tables, through the same sink as raw events
 * (batching, offsets after insert, replay-safe by Kafka position, dead letters).
 */

const dayPartition = (r: { retention_days: number; ts: number }) => `${r.retention_days}-${Math.floor(r.ts / 86_400)}`;

export const occupancyTarget: SinkTarget<OccupancyRow> = {
  name: 'occupancy_updates',
  decode(value) {
    const u = decodeOccupancyUpdate(value);
    return [
      {
        raw: u,
        venueId: u.venueId,
        operatorId: u.operatorId,
        toRow: (origin, ctx) => ({
          operator_id: u.operatorId,
          venue_id: u.venueId,
          zone_id: u.zoneId ?? '',
          ts: Math.floor(u.ts / 1000),
          ts_ms: u.ts % 1000,
          local_day: dayString(localDayNumber(u.ts, ctx.timezone)),
          value: u.value,
          capacity: u.capacity,
          percent: u.percent,
          reason: u.reason,
          clamped: u.clamped,
          retention_days: ctx.retentionDays,
          kafka_topic: origin.topic,
          kafka_partition: origin.partition,
          kafka_offset: origin.offset,
        }),
      },
    ];
  },
  insert: insertOccupancy,
  storedOffsets: (ch, q) => storedOffsets(ch, q, 'occupancy_updates'),
  partitionKey: dayPartition,
};

export const healthTarget: SinkTarget<HealthRow> = {
  name: 'connector_health',
  decode(value) {
    const c = decodeConnectorHealthChange(value);
    return [
      {
        raw: c,
        venueId: c.venueId,
        operatorId: c.operatorId,
        toRow: (origin, ctx) => ({
          operator_id: c.operatorId,
          venue_id: c.venueId,
          integration_id: c.integrationId,
          connector_type: c.connectorType,
          status: c.status,
          previous: c.previous ?? '',
          transition: c.previous === c.status ? 0 : 1,
          last_event_at: c.lastEventAt === null ? 0 : Math.floor(c.lastEventAt / 1000),
          has_last_event: c.lastEventAt === null ? 0 : 1,
          rejection_rate: c.rejectionRate,
          reason: c.reason,
          ts: Math.floor(c.ts / 1000),
          ts_ms: c.ts % 1000,
          retention_days: ctx.retentionDays,
          kafka_topic: origin.topic,
          kafka_partition: origin.partition,
          kafka_offset: origin.offset,
        }),
      },
    ];
  },
  insert: insertHealth,
  storedOffsets: (ch, q) => storedOffsets(ch, q, 'connector_health'),
  partitionKey: dayPartition,
};
