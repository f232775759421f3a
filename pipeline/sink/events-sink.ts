import type { EachBatchPayload, KafkaMessage } from 'kafkajs';
import type { Ch } from '../../clickhouse/client.js';
import { decodeEvent, type CanonicalEvent } from '../../lib/events.js';
import type { Logger } from '../../lib/logger.js';

export interface EventRow {
  event_id: string;
  operator_id: string;
  venue_id: string;
  zone_id: string;
  connector_type: string;
  event_type: string;
  ts: number;
  ts_ms: number;
  received_at: number;
  device: string;
  randomized_mac: number;
  metric_names: string[];
  metric_values: number[];
  payload: string;
  retention_days: number;
  kafka_topic: string;
  kafka_partition: number;
  kafka_offset: string;
}

export function toRow(e: CanonicalEvent, topic: string, partition: number, offset: string, retentionDays: number): EventRow {
  const metrics = Object.entries(e.metrics);
  return {
    event_id: e.id,
    operator_id: e.operatorId,
    venue_id: e.venueId,
    zone_id: e.zoneId ?? '',
    connector_type: e.connectorType,
    event_type: e.type,
    ts: Math.floor(e.ts / 1000),
    ts_ms: e.ts % 1000,
    received_at: Math.floor(e.receivedAt / 1000),
    device: e.device ?? '',
    randomized_mac: e.randomizedMac ? 1 : 0,
    metric_names: metrics.map(([k]) => k),
    metric_values: metrics.map(([, v]) => v as number),
    payload: JSON.stringify(e.payload),
    retention_days: retentionDays,
    kafka_topic: topic,
    kafka_partition: partition,
    kafka_offset: offset,
  };
}

export interface SinkOptions {
  ch: Ch;
  log: Logger;
  table?: string;
  retentionDays?: (e: CanonicalEvent) => number;
  onPoison?: (message: KafkaMessage, error: Error) => Promise<void>;
}

/** Writes each fetched batch to the raw table, then commits its offsets. */
export function eventsSink(opts: SinkOptions) {
  const table = opts.table ?? 'events';
  return async ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat, isRunning, isStale }: EachBatchPayload) => {
    if (!isRunning() || isStale()) return;
    const rows: EventRow[] = [];
    for (const message of batch.messages) {
      try {
        const event = decodeEvent(message.value);
        rows.push(toRow(event, batch.topic, batch.partition, message.offset, opts.retentionDays?.(event) ?? 7));
      } catch (err) {
        await opts.onPoison?.(message, err as Error);
      }
    }
    if (rows.length > 0) await opts.ch.insert({ table, values: rows, format: 'JSONEachRow' });
    resolveOffset(batch.lastOffset());
    await commitOffsetsIfNecessary();
    await heartbeat();
  };
}
