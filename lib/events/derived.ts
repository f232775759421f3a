import { z } from 'zod';
import { CONNECTOR_TYPES, epochMs } from './vocabulary.js';
import { decodeJson, encodeJson } from './wire.js';

/*
 * Derived streams: what the stream processors (pipeline/processors/) produce, and the ingest
 * reports connector health is derived from. Each is keyed by venue id, so a venue's derived
 * messages share a partition number with its events.
 */

/** A new occupancy figure for a venue (zoneId null) or one of its zones. */
export const occupancyUpdateSchema = z.object({
  operatorId: z.uuid(),
  venueId: z.uuid(),
  zoneId: z.uuid().nullable(),
  /** People present after the change, never negative. */
  value: z.number().int().nonnegative(),
  capacity: z.number().nonnegative().nullable(),
  /** value / capacity × 100, null without a capacity (or a capacity of 0). */
  percent: z.number().nonnegative().nullable(),
  /** When the figure holds from, epoch ms (the event time of the change; the reset instant for resets). */
  ts: epochMs,
  /** `flow`: entries/exits; `count`: a connector's absolute count (re-baseline); `reset`: the daily reset. */
  reason: z.enum(['flow', 'count', 'reset']),
  /** People the clamp at 0 dropped in this change (exits counted while nobody was left). */
  clamped: z.number().int().nonnegative(),
});
export type OccupancyUpdate = z.infer<typeof occupancyUpdateSchema>;

/** `waiting`: created lately and never heard from yet (within the grace before it counts as offline, no alarm). */
export const CONNECTOR_HEALTH = ['healthy', 'degraded', 'offline', 'waiting'] as const;
export type ConnectorHealth = (typeof CONNECTOR_HEALTH)[number];

/** An integration's health changed (the alarm rules raise and clear alarms from these). */
export const connectorHealthChangeSchema = z.object({
  operatorId: z.uuid(),
  venueId: z.uuid(),
  integrationId: z.uuid(),
  connectorType: z.enum(CONNECTOR_TYPES),
  status: z.enum(CONNECTOR_HEALTH),
  previous: z.enum(CONNECTOR_HEALTH).nullable(),
  /** Newest event or heartbeat time of the integration, epoch ms; null when it never sent anything. */
  lastEventAt: epochMs.nullable(),
  /** Rejected / (accepted + rejected) over the health window, 0..1. */
  rejectionRate: z.number().min(0).max(1),
  reason: z.string().max(200),
  ts: epochMs,
});
export type ConnectorHealthChange = z.infer<typeof connectorHealthChangeSchema>;

/** One ingest request's outcome for a venue and connector (accepted and rejected counts): input of connector health. */
export const ingestReportSchema = z.object({
  operatorId: z.uuid(),
  venueId: z.uuid(),
  connectorType: z.enum(CONNECTOR_TYPES),
  accepted: z.number().int().nonnegative(),
  rejected: z.number().int().nonnegative(),
  ts: epochMs,
  /**
   * Set when the events came through one of the service's own vendor links (a webhook receiver or
   * a poller) rather than `/ingest`: that integration's delivery outcome, so connector health can
   * name a broken link (a refused signature, a failing poll) before the silence does.
   */
  source: z
    .object({
      integrationId: z.uuid(),
      link: z.enum(['webhook', 'poll']),
      /** Whether the delivery was taken (signature good, body read) or the poll answered. */
      ok: z.boolean(),
      /** What went wrong, in words a person can act on; never a secret or a raw identifier. */
      error: z.string().max(300).optional(),
    })
    .optional(),
});
export type IngestReport = z.infer<typeof ingestReportSchema>;
export type SourceOutcome = NonNullable<IngestReport['source']>;

export const encodeOccupancyUpdate = (u: OccupancyUpdate): Buffer => encodeJson(u);
export const decodeOccupancyUpdate = (value: Buffer | null): OccupancyUpdate => decodeJson(occupancyUpdateSchema, value);
export const encodeConnectorHealthChange = (c: ConnectorHealthChange): Buffer => encodeJson(c);
export const decodeConnectorHealthChange = (value: Buffer | null): ConnectorHealthChange => decodeJson(connectorHealthChangeSchema, value);
export const encodeIngestReport = (r: IngestReport): Buffer => encodeJson(r);
export const decodeIngestReport = (value: Buffer | null): IngestReport => decodeJson(ingestReportSchema, value);
