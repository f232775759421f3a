import { z } from 'zod';
import {
  createIntegration,
  deleteIntegration,
  getIntegration,
  listIntegrations,
  updateIntegration,
} from '../../../domain/integrations/integrations.js';
import { createIntegrationBody, REDACTED_MARKER } from '../../../domain/integrations/config-schemas.js';
import { CONNECTOR_TYPES } from '../../../lib/events/vocabulary.js';
import { operation } from './operation.js';
import { deletedResponse, integrationParams, serverOwned, timestamp, VENUE_ERRORS, venueParams } from './schemas.js';

/** The config is checked against the integration's own connector type once it is loaded. */
const updateIntegrationBody = z
  .strictObject({
    ...serverOwned({ venue_id: 'venue_id is immutable: an integration cannot move to another venue' }),
    connector_type: z.enum(CONNECTOR_TYPES).optional(),
    config: z.record(z.string(), z.unknown()).optional(),
    is_active: z.boolean().optional(),
  })
  .refine((b) => b.config !== undefined || b.is_active !== undefined, 'send config, is_active or both');

const integration = z.object({
  id: z.uuid(),
  venue_id: z.uuid(),
  connector_type: z.enum(CONNECTOR_TYPES),
  is_active: z.boolean(),
  config: z.record(z.string(), z.unknown()).describe(`Stored config; every secret field reads "${REDACTED_MARKER}"`),
  created_at: timestamp,
});

export const integrationOperations = [
  operation({
    id: 'listIntegrations',
    method: 'get',
    path: '/api/venues/{id}/integrations',
    summary: "The venue's integrations (active and paused, not deleted) with secrets redacted",
    tag: 'Integrations',
    auth: 'bearer',
    params: venueParams,
    response: { status: 200, description: 'Integrations', schema: z.object({ data: z.array(integration), total: z.number().int() }) },
    errors: VENUE_ERRORS,
    handler: ({ params }, { deps, operator }) => listIntegrations(deps.services.db, operator.id, params.id),
  }),
  operation({
    id: 'createIntegration',
    method: 'post',
    path: '/api/venues/{id}/integrations',
    summary: 'Connect hardware: config is validated per connector_type; secret fields are encrypted at rest (AES-256-GCM)',
    tag: 'Integrations',
    auth: 'bearer',
    params: venueParams,
    body: createIntegrationBody,
    response: { status: 201, description: 'The new integration', schema: integration.omit({ config: true }) },
    errors: VENUE_ERRORS,
    handler: ({ params, body }, { deps, operator }) => createIntegration(deps.services.db, deps.keyring, operator.id, params.id, body),
  }),
  operation({
    id: 'getIntegration',
    method: 'get',
    path: '/api/venues/{id}/integrations/{integrationId}',
    summary: 'One integration of the venue with secrets redacted',
    tag: 'Integrations',
    auth: 'bearer',
    params: integrationParams,
    response: { status: 200, description: 'The integration', schema: integration.extend({ updated_at: timestamp }) },
    errors: VENUE_ERRORS,
    handler: ({ params }, { deps, operator }) => getIntegration(deps.services.db, operator.id, params.id, params.integrationId),
  }),
  operation({
    id: 'updateIntegration',
    method: 'put',
    path: '/api/venues/{id}/integrations/{integrationId}',
    summary:
      `Replace the whole config (validated for the integration's connector_type, which cannot change; a secret sent as "${REDACTED_MARKER}" keeps its stored value) ` +
      'and/or pause (is_active false) or resume it',
    tag: 'Integrations',
    auth: 'bearer',
    params: integrationParams,
    body: updateIntegrationBody,
    response: { status: 200, description: 'The updated integration', schema: integration.extend({ updated_at: timestamp }) },
    errors: VENUE_ERRORS,
    handler: ({ params, body }, { deps, operator }) =>
      updateIntegration(deps.services.db, deps.keyring, operator.id, params.id, params.integrationId, body),
  }),
  operation({
    id: 'deleteIntegration',
    method: 'delete',
    path: '/api/venues/{id}/integrations/{integrationId}',
    summary: 'Soft delete: later access is a 404; the row and its non-secret config are kept, its sealed secrets erased',
    tag: 'Integrations',
    auth: 'bearer',
    params: integrationParams,
    response: { status: 200, description: 'The integration is deleted', schema: deletedResponse },
    errors: VENUE_ERRORS,
    handler: ({ params }, { deps, operator }) => deleteIntegration(deps.services.db, operator.id, params.id, params.integrationId),
  }),
];
