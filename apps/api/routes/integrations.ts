import type Router from '@koa/router';
import { z } from 'zod';
import {
  createIntegration,
  deleteIntegration,
  getIntegration,
  listIntegrations,
  updateIntegration,
} from '../../../domain/integrations/integrations.js';
import { createIntegrationBody, REDACTED_MARKER } from '../../../domain/integrations/config-schemas.js';
import { CONNECTOR_TYPES } from '../../../lib/events.js';
import { keyringFromConfig } from '../../../lib/secret-box.js';
import { parseInput } from '../../../lib/validate.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';
import { authedRouter } from './authed.js';
import { deletedResponse, readOnly, venueParams } from './venues.js';

const integrationParams = venueParams.extend({ integrationId: z.uuid('must be a UUID') });

/** The config is checked against the integration's own connector type once it is loaded. */
const updateIntegrationBody = z
  .strictObject({
    connector_type: z.enum(CONNECTOR_TYPES).optional(),
    config: z.record(z.string(), z.unknown()).optional(),
    is_active: z.boolean().optional(),
    id: readOnly(),
    venue_id: readOnly('venue_id is immutable: an integration cannot move to another venue'),
    created_at: readOnly(),
    updated_at: readOnly(),
    deleted_at: readOnly(),
  })
  .refine((b) => b.config !== undefined || b.is_active !== undefined, 'send config, is_active or both');

const timestamp = z.iso.datetime();
const integration = z.object({
  id: z.uuid(),
  venue_id: z.uuid(),
  connector_type: z.enum(CONNECTOR_TYPES),
  is_active: z.boolean(),
  config: z.record(z.string(), z.unknown()).describe(`Stored config; every secret field reads "${REDACTED_MARKER}"`),
  created_at: timestamp,
});

export function integrationRoutes(deps: ApiDeps): Router {
  const { db, cfg } = deps.services;
  const keyring = keyringFromConfig(cfg);
  const router = authedRouter(deps);
  router.get('/api/venues/:id/integrations', async (ctx) => {
    const { id } = parseInput(venueParams, ctx.params, 'params');
    ctx.body = await listIntegrations(db, ctx.state.operator.id, id);
  });
  router.post('/api/venues/:id/integrations', async (ctx) => {
    const { id } = parseInput(venueParams, ctx.params, 'params');
    const input = parseInput(createIntegrationBody, ctx.request.body ?? {}, 'body');
    ctx.status = 201;
    ctx.body = await createIntegration(db, keyring, ctx.state.operator.id, id, input);
  });
  router.get('/api/venues/:id/integrations/:integrationId', async (ctx) => {
    const { id, integrationId } = parseInput(integrationParams, ctx.params, 'params');
    ctx.body = await getIntegration(db, ctx.state.operator.id, id, integrationId);
  });
  router.put('/api/venues/:id/integrations/:integrationId', async (ctx) => {
    const { id, integrationId } = parseInput(integrationParams, ctx.params, 'params');
    const input = parseInput(updateIntegrationBody, ctx.request.body ?? {}, 'body');
    ctx.body = await updateIntegration(db, keyring, ctx.state.operator.id, id, integrationId, input);
  });
  router.delete('/api/venues/:id/integrations/:integrationId', async (ctx) => {
    const { id, integrationId } = parseInput(integrationParams, ctx.params, 'params');
    ctx.body = await deleteIntegration(db, ctx.state.operator.id, id, integrationId);
  });
  return router;
}

const venueErrors = [400, 401, 403, 404, 429];

export const docs: RouteDoc[] = [
  {
    method: 'get',
    path: '/api/venues/{id}/integrations',
    summary: "The venue's integrations (active and paused, not deleted) with secrets redacted",
    tag: 'Integrations',
    auth: 'bearer',
    params: venueParams,
    responses: {
      200: { description: 'Integrations', schema: z.object({ data: z.array(integration), total: z.number().int() }) },
    },
    errors: venueErrors,
  },
  {
    method: 'post',
    path: '/api/venues/{id}/integrations',
    summary: 'Connect hardware: config is validated per connector_type; secret fields are encrypted at rest (AES-256-GCM)',
    tag: 'Integrations',
    auth: 'bearer',
    params: venueParams,
    body: createIntegrationBody,
    responses: { 201: { description: 'The new integration', schema: integration.omit({ config: true }) } },
    errors: venueErrors,
  },
  {
    method: 'get',
    path: '/api/venues/{id}/integrations/{integrationId}',
    summary: 'One integration of the venue with secrets redacted',
    tag: 'Integrations',
    auth: 'bearer',
    params: integrationParams,
    responses: { 200: { description: 'The integration', schema: integration.extend({ updated_at: timestamp }) } },
    errors: venueErrors,
  },
  {
    method: 'put',
    path: '/api/venues/{id}/integrations/{integrationId}',
    summary:
      `Replace the whole config (validated for the integration's connector_type, which cannot change; a secret sent as "${REDACTED_MARKER}" keeps its stored value) ` +
      'and/or pause (is_active false) or resume it',
    tag: 'Integrations',
    auth: 'bearer',
    params: integrationParams,
    body: updateIntegrationBody,
    responses: { 200: { description: 'The updated integration', schema: integration.extend({ updated_at: timestamp }) } },
    errors: venueErrors,
  },
  {
    method: 'delete',
    path: '/api/venues/{id}/integrations/{integrationId}',
    summary: 'Soft delete: later access is a 404; the row and its non-secret config are kept, its sealed secrets erased',
    tag: 'Integrations',
    auth: 'bearer',
    params: integrationParams,
    responses: { 200: { description: 'The integration is deleted', schema: deletedResponse } },
    errors: venueErrors,
  },
];
