import type { Queryable } from '../../postgres/client.js';
import { sourceIntegrationRow } from '../../postgres/queries/integrations.js';
import type { SourceOutcome } from '../../lib/events/derived.js';
import type { ConnectorType } from '../../lib/events/vocabulary.js';
import { publishReport } from '../ingest/ingest.js';
import type { Publisher } from '../../lib/kafka.js';
import type { Logger } from '../../lib/logger.js';
import { open, type Keyring } from '../../lib/secret-box.js';
import type { Operator } from '../tenants/operators.js';
import { secretContext } from './integrations.js';

/**
 * What a vendor link (a webhook receiver or a poller) needs of its integration: who owns it, which
 * venue its events belong to, and its config with the secrets opened. Lives only in memory, for
 * the delivery or poll in hand; never logged.
 */
export interface SourceIntegration {
  id: string;
  venueId: string;
  connectorType: ConnectorType;
  operator: Operator;
  /** Plain fields and opened secrets together, as the operator configured them. */
  config: Record<string, unknown>;
  createdAt: Date;
}

/** The integration, if it is live and active on an active venue; undefined otherwise (the caller answers 404 or stops polling). */
export async function sourceIntegration(db: Queryable, keyring: Keyring, integrationId: string): Promise<SourceIntegration | undefined> {
  const row = await sourceIntegrationRow(db, integrationId);
  if (!row) return undefined;
  const secrets = Object.fromEntries(
    Object.entries(row.secrets).map(([field, envelope]) => [field, open(envelope, keyring.keys, secretContext(row.id, field))]),
  );
  return {
    id: row.id,
    venueId: row.venue_id,
    connectorType: row.connector_type,
    operator: { id: row.operator_id, plan: row.plan, billingAnchor: row.billing_anchor },
    config: { ...row.config, ...secrets },
    createdAt: row.created_at,
  };
}

export interface SourceReportDeps {
  publisher: Publisher;
  /** The ingest reports topic (connector health's input). */
  reportsTopic: string;
  log: Logger;
}

/**
 * Tells connector health how a delivery or poll went when it brought no events through ingest
 * (a refused signature, a failed poll, an empty answer). Ingest's own reports already carry the
 * outcome of deliveries that did. Best effort: a lost report only delays what health shows.
 */
export async function reportSourceOutcome(
  deps: SourceReportDeps,
  integration: Pick<SourceIntegration, 'id' | 'venueId' | 'connectorType' | 'operator'>,
  outcome: Omit<SourceOutcome, 'integrationId'>,
  now = Date.now(),
): Promise<void> {
  await publishReport(deps, deps.reportsTopic, {
    operatorId: integration.operator.id,
    venueId: integration.venueId,
    connectorType: integration.connectorType,
    accepted: 0,
    rejected: 0,
    ts: now,
    source: { integrationId: integration.id, ...outcome, error: outcome.error?.slice(0, 300) },
  });
}
