import { z } from 'zod';

/**
 * The words of the event contract shared by ingest, pipeline, edge and api: connector and event
 * types, telemetry keys, metric names and the time bound. Which connector sends which type, and
 * with which payload and metrics: docs/events.md.
 */

export const CONNECTOR_TYPES = ['meraki', 'aruba', 'unifi', 'mywifi', 'square', 'density', 'verkada'] as const;
export type ConnectorType = (typeof CONNECTOR_TYPES)[number];

export const EVENT_TYPES = ['device_seen', 'device_left', 'entry', 'exit', 'occupancy', 'environment', 'heartbeat', 'transaction'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Telemetry keys a client may query or subscribe to (spec: Telemetry keys). */
export const TELEMETRY_KEYS = ['occupancy', 'temperature', 'co2', 'humidity', 'noise', 'entries', 'exits', 'devices'] as const;
export type TelemetryKey = (typeof TELEMETRY_KEYS)[number];

/** Numeric metrics an event may carry; `devices` is derived (distinct device pseudonyms), never sent. */
export const METRIC_NAMES = ['occupancy', 'temperature', 'co2', 'humidity', 'noise', 'entries', 'exits', 'amount'] as const;
export type MetricName = (typeof METRIC_NAMES)[number];

/**
 * Event times end before 2100-01-01: ClickHouse's DateTime ends in 2106 (later times would be
 * stored wrapped around), and telemetry queries share the bound.
 */
export const MAX_TS_MS = Date.UTC(2100, 0, 1);
/** An event time as every message type states it: epoch milliseconds before MAX_TS_MS. */
export const epochMs = z.number().int().nonnegative().lt(MAX_TS_MS);
