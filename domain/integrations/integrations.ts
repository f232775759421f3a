import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Db } from '../../postgres/client.js';
import { transaction } from '../../postgres/client.js';
import {
  insertIntegration,
  integrationIdsSealedWithout,
  liveIntegration,
  liveIntegrations,
  lockIntegrationSecrets,
  lockLiveIntegration,
  replaceIntegrationSecrets,
  softDeleteIntegration,
  updateIntegrationRow,
  type IntegrationRow,
} from '../../postgres/queries/integrations.js';
import type { DeletedRow } from '../../postgres/queries/venues.js';
import type { ConnectorType } from '../../lib/events/vocabulary.js';
import { notFound, validation, type FieldProblem } from '../../lib/errors.js';
import { parseInput } from '../../lib/validate.js';
import { open, seal, type Envelope, type Keyring } from '../../lib/secret-box.js';
import { ownedVenue } from '../venues/access.js';
import { CONNECTORS, REDACTED_MARKER, type CreateIntegrationInput } from './config-schemas.js';

export interface IntegrationView {
  id: string;
  venue_id: string;
  connector_type: ConnectorType;
  is_active: boolean;
  /** Stored config with every secret replaced by REDACTED_MARKER. */
  config: Record<string, unknown>;
  created_at: Date;
}

export interface CreatedIntegration {
  id: string;
  venue_id: string;
  connector_type: ConnectorType;
  is_active: boolean;
  created_at: Date;
}

export interface IntegrationUpdate {
  connector_type?: ConnectorType;
  config?: Record<string, unknown>;
  is_active?: boolean;
}

/** The AAD an envelope is bound to: a ciphertext opens only in its own integration and field. */
export const secretContext = (integrationId: string, field: string) => `integrations/${integrationId}/${field}`;

function redactedConfig(row: Pick<IntegrationRow, 'config' | 'secrets'>): Record<string, unknown> {
  return { ...row.config, ...Object.fromEntries(Object.keys(row.secrets).map((field) => [field, REDACTED_MARKER])) };
}

const view = (row: IntegrationRow): IntegrationView => ({
  id: row.id,
  venue_id: row.venue_id,
  connector_type: row.connector_type,
  is_active: row.is_active,
  config: redactedConfig(row),
  created_at: row.created_at,
});

/** Re-seals under the current key when sealed under an older one; otherwise the envelope as is. */
function withCurrentKey(keyring: Keyring, integrationId: string, field: string, envelope: Envelope): Envelope {
  if (envelope.kid === keyring.current.keyId) return envelope;
  const context = secretContext(integrationId, field);
  return seal(open(envelope, keyring.keys, context), keyring.current, context);
}

/**
 * Splits a validated config into plain fields and sealed secrets. A secret sent as the marker keeps
 * the stored envelope; the marker for a secret with nothing stored is a 400.
 */
function storeConfig(
  keyring: Keyring,
  integrationId: string,
  type: ConnectorType,
  input: Record<string, unknown>,
  stored: Record<string, Envelope>,
): { config: Record<string, unknown>; secrets: Record<string, Envelope> } {
  const secretFields = CONNECTORS[type].secrets;
  const config: Record<string, unknown> = {};
  const secrets: Record<string, Envelope> = {};
  const problems: FieldProblem[] = [];
  for (const [field, value] of Object.entries(input)) {
    if (value === undefined) continue;
    if (!secretFields.has(field)) {
      config[field] = value;
    } else if (value !== REDACTED_MARKER) {
      secrets[field] = seal(String(value), keyring.current, secretContext(integrationId, field));
    } else {
      const kept = Object.hasOwn(stored, field) ? stored[field] : undefined;
      if (kept) secrets[field] = withCurrentKey(keyring, integrationId, field, kept);
      else
        problems.push({
          field: `config.${field}`,
          message: `${REDACTED_MARKER} keeps a stored secret, but none is stored; send the value`,
        });
    }
  }
  if (problems.length > 0) throw validation(`invalid body: check ${problems.map((p) => p.field).join(', ')}`, problems);
  return { config, secrets };
}

export async function listIntegrations(db: Db, operatorId: string, venueId: string): Promise<{ data: IntegrationView[]; total: number }> {
  await ownedVenue(db, operatorId, venueId);
  const data = (await liveIntegrations(db, venueId)).map(view);
  return { data, total: data.length };
}

export async function createIntegration(
  db: Db,
  keyring: Keyring,
  operatorId: string,
  venueId: string,
  input: CreateIntegrationInput,
): Promise<CreatedIntegration> {
  await ownedVenue(db, operatorId, venueId);
  // The id is chosen here because the envelopes are bound to it.
  const id = randomUUID();
  const stored = storeConfig(keyring, id, input.connector_type, input.config, {});
  const row = await insertIntegration(db, { id, venueId, connectorType: input.connector_type, ...stored });
  return { id: row.id, venue_id: row.venue_id, connector_type: row.connector_type, is_active: row.is_active, created_at: row.created_at };
}

export async function getIntegration(
  db: Db,
  operatorId: string,
  venueId: string,
  integrationId: string,
): Promise<IntegrationView & { updated_at: Date }> {
  await ownedVenue(db, operatorId, venueId);
  const row = await liveIntegration(db, venueId, integrationId);
  if (!row) throw notFound('integration');
  return { ...view(row), updated_at: row.updated_at };
}

/**
 * `config` replaces the whole config (validated for the integration's own type; secrets sent as
 * the marker are kept); `is_active` pauses or resumes it. The row is locked so two updates cannot
 * interleave their read and write of the secrets.
 */
export async function updateIntegration(
  db: Db,
  keyring: Keyring,
  operatorId: string,
  venueId: string,
  integrationId: string,
  input: IntegrationUpdate,
): Promise<IntegrationView & { updated_at: Date }> {
  return transaction(db, async (tx) => {
    await ownedVenue(tx, operatorId, venueId);
    const row = await lockLiveIntegration(tx, venueId, integrationId);
    if (!row) throw notFound('integration');
    if (input.connector_type !== undefined && input.connector_type !== row.connector_type) {
      throw validation('connector_type cannot be changed', [
        {
          field: 'connector_type',
          message: `this integration is ${row.connector_type}; delete it and create a new integration to change type`,
        },
      ]);
    }
    let stored = { config: row.config, secrets: row.secrets };
    if (input.config !== undefined) {
      // Wrapped so the problems' fields read "config.<field>".
      const { config } = parseInput(z.object({ config: CONNECTORS[row.connector_type].config }), { config: input.config }, 'body');
      stored = storeConfig(keyring, row.id, row.connector_type, config, row.secrets);
    }
    const updated = await updateIntegrationRow(tx, row.id, { ...stored, isActive: input.is_active ?? row.is_active });
    return { ...view(updated), updated_at: updated.updated_at };
  });
}

/**
 * Soft delete: the row and its plain config stay for history, later access is a 404. The sealed
 * secrets are erased: a deleted integration can never be used again, so nothing needs them.
 */
export async function deleteIntegration(db: Db, operatorId: string, venueId: string, integrationId: string): Promise<DeletedRow> {
  await ownedVenue(db, operatorId, venueId);
  const deleted = await softDeleteIntegration(db, venueId, integrationId);
  if (!deleted) throw notFound('integration');
  return deleted;
}

/**
 * Key rotation, last step: re-seals every envelope not under the current key, so previous keys
 * can then be removed. Throws (and stops) on an envelope no configured key opens. Returns the
 * number of integrations re-sealed.
 */
export async function resealIntegrationSecrets(db: Db, keyring: Keyring, batchSize = 100): Promise<number> {
  let count = 0;
  for (;;) {
    const ids = await integrationIdsSealedWithout(db, keyring.current.keyId, batchSize);
    if (ids.length === 0) return count;
    for (const id of ids) {
      await transaction(db, async (tx) => {
        const secrets = await lockIntegrationSecrets(tx, id);
        if (!secrets) return;
        const resealed = Object.fromEntries(
          Object.entries(secrets).map(([field, env]) => [field, withCurrentKey(keyring, id, field, env)]),
        );
        await replaceIntegrationSecrets(tx, id, resealed);
      });
      count++;
    }
  }
}
