import { z } from 'zod';
import type { Ch } from '../../clickhouse/client.js';
import { latestHealth } from '../../clickhouse/queries/derived.js';
import { CONNECTOR_HEALTH, type ConnectorHealth } from '../../lib/events/derived.js';
import { CONNECTOR_TYPES } from '../../lib/events/vocabulary.js';
import type { Queryable } from '../../postgres/client.js';
import { operatorActiveIntegrations } from '../../postgres/queries/integrations.js';
import { EXPECTED_INTERVAL_MS, OFFLINE_AFTER } from './connector-intervals.js';

/** GET /api/dashboard/connectors: no input. */
export const connectorHealthInput = z.object({});

export const connectorHealthOutput = z.object({
  connectors: z.array(
    z.object({
      type: z.enum(CONNECTOR_TYPES),
      status: z.enum(CONNECTOR_HEALTH),
      count: z.number().int().positive(),
      /** Newest stored event of the group's venues and connector type (ISO 8601); null when none ever sent anything. */
      lastEventAt: z.iso.datetime().nullable(),
    }),
  ),
});
export type ConnectorHealthGroups = z.infer<typeof connectorHealthOutput>;

/** Health rows are snapshotted hourly: one older than this means the health processor lost track. */
const FRESH_S = 2 * 3600;

/**
 * The operator's active integrations grouped by connector type and health status, from the health
 * processor's newest row per integration (docs/processors.md#connector-health). An integration
 * without a recent row (never sent anything, or the processor has not evaluated it) is `offline`,
 * or `waiting` within its grace after creation.
 * `lastEventAt` is the newest event the sink stored for the integration's venue and type: health
 * rows are written on transitions and hourly, so theirs can be an hour old.
 */
export async function connectorHealth(
  deps: { db: Queryable; ch: Ch },
  operatorId: string,
  now = Date.now(),
): Promise<ConnectorHealthGroups> {
  const groups = new Map<string, { type: (typeof CONNECTOR_TYPES)[number]; status: ConnectorHealth; count: number; last: number | null }>();
  for (const { integration: i, status, last } of await integrationStatuses(deps, operatorId, now)) {
    const key = `${i.connector_type}|${status}`;
    const g = groups.get(key) ?? { type: i.connector_type, status, count: 0, last: null };
    g.count++;
    if (last !== null && (g.last === null || last > g.last)) g.last = last;
    groups.set(key, g);
  }
  const order = (g: { type: string; status: string }) =>
    CONNECTOR_TYPES.indexOf(g.type as never) * 10 + CONNECTOR_HEALTH.indexOf(g.status as never);
  return {
    connectors: [...groups.values()]
      .sort((a, b) => order(a) - order(b))
      .map((g) => ({
        type: g.type,
        status: g.status,
        count: g.count,
        lastEventAt: g.last === null ? null : new Date(g.last).toISOString(),
      })),
  };
}

export interface IntegrationStatus {
  integration: { id: string; venue_id: string; connector_type: (typeof CONNECTOR_TYPES)[number] };
  status: ConnectorHealth;
  /** Newest sign of life, epoch ms; null when none. */
  last: number | null;
}

/** Each of the operator's active integrations (of active venues) with its health, as the groups count them. */
export async function integrationStatuses(
  deps: { db: Queryable; ch: Ch },
  operatorId: string,
  now = Date.now(),
): Promise<IntegrationStatus[]> {
  const integrations = await operatorActiveIntegrations(deps.db, operatorId);
  if (integrations.length === 0) return [];
  const rows = await latestHealth(deps.ch, {
    operatorId,
    integrationIds: integrations.map((i) => i.id),
    sinceSec: Math.floor(now / 1000) - FRESH_S,
  });
  const byId = new Map(rows.map((r) => [r.integration_id, r]));
  return integrations.map((i) => {
    const r = byId.get(i.id);
    const fresh = now - i.created_at.getTime() <= OFFLINE_AFTER * EXPECTED_INTERVAL_MS[i.connector_type];
    const status = (r?.status ?? (fresh ? 'waiting' : 'offline')) as ConnectorHealth;
    // The health row's value only without a stored-event row (events older than the table).
    const last = i.last_event_at ? i.last_event_at.getTime() : r && r.has_last_event ? Number(r.last_event_at) * 1000 : null;
    return { integration: i, status, last };
  });
}
