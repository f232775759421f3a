import type Router from '@koa/router';
import { z } from 'zod';
import { createZone, deleteZone, getZone, listZones, updateZone, ZONE_SLUG, ZONE_TYPES } from '../../../domain/zones/zones.js';
import { nulFree, parseInput } from '../../../lib/validate.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';
import { authedRouter } from './authed.js';
import { deletedResponse, readOnly, venueParams } from './venues.js';

const zoneParams = venueParams.extend({ zoneId: z.uuid('must be a UUID') });

const zoneFields = {
  slug: z.string().max(64).regex(ZONE_SLUG, 'URL-safe: lower-case letters and digits, words joined by single "-"'),
  name: nulFree(z.string().trim().min(1).max(200)),
  type: z.enum(ZONE_TYPES),
  capacity: z.number().min(0).nullable().optional(),
};

const serverFields = {
  id: readOnly(),
  venue_id: readOnly('venue_id is immutable: a zone cannot move to another venue'),
  is_active: readOnly('read-only field; DELETE the zone to deactivate it'),
  created_at: readOnly(),
  updated_at: readOnly(),
  deleted_at: readOnly(),
};

const createZoneBody = z.strictObject({ ...zoneFields, ...serverFields });

const updateZoneBody = z
  .strictObject({ ...zoneFields, slug: zoneFields.slug.optional(), name: zoneFields.name.optional(), type: zoneFields.type.optional(), ...serverFields })
  .refine((b) => Object.values(b).some((v) => v !== undefined), 'send at least one of slug, name, type, capacity');

const timestamp = z.iso.datetime();
const zone = z.object({
  id: z.uuid(),
  venue_id: z.uuid(),
  slug: z.string(),
  name: z.string(),
  type: z.enum(ZONE_TYPES),
  capacity: z.number().nullable(),
  is_active: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});

/** Zones of a venue; every route checks zone → venue → operator. */
export function zoneRoutes(deps: ApiDeps): Router {
  const { db } = deps.services;
  const router = authedRouter(deps);
  router.get('/api/venues/:id/zones', async (ctx) => {
    const { id } = parseInput(venueParams, ctx.params, 'params');
    ctx.body = await listZones(db, ctx.state.operator.id, id);
  });
  router.post('/api/venues/:id/zones', async (ctx) => {
    const { id } = parseInput(venueParams, ctx.params, 'params');
    const input = parseInput(createZoneBody, ctx.request.body ?? {}, 'body');
    ctx.status = 201;
    ctx.body = await createZone(db, ctx.state.operator.id, id, input);
  });
  router.get('/api/venues/:id/zones/:zoneId', async (ctx) => {
    const { id, zoneId } = parseInput(zoneParams, ctx.params, 'params');
    ctx.body = await getZone(db, ctx.state.operator.id, id, zoneId);
  });
  router.put('/api/venues/:id/zones/:zoneId', async (ctx) => {
    const { id, zoneId } = parseInput(zoneParams, ctx.params, 'params');
    const patch = parseInput(updateZoneBody, ctx.request.body ?? {}, 'body');
    ctx.body = await updateZone(db, ctx.state.operator.id, id, zoneId, patch);
  });
  router.delete('/api/venues/:id/zones/:zoneId', async (ctx) => {
    const { id, zoneId } = parseInput(zoneParams, ctx.params, 'params');
    ctx.body = await deleteZone(db, ctx.state.operator.id, id, zoneId);
  });
  return router;
}

const venueErrors = [400, 401, 403, 404, 429];

export const docs: RouteDoc[] = [
  {
    method: 'get',
    path: '/api/venues/{id}/zones',
    summary: "The venue's active zones, oldest first",
    tag: 'Zones',
    auth: 'bearer',
    params: venueParams,
    responses: {
      200: {
        description: 'Active zones',
        schema: z.object({
          data: z.array(zone.pick({ id: true, slug: true, name: true, type: true, capacity: true, is_active: true })),
          total: z.number().int(),
        }),
      },
    },
    errors: venueErrors,
  },
  {
    method: 'post',
    path: '/api/venues/{id}/zones',
    summary: 'Create a zone; a slug already used by an active zone of the venue is a 409 CONFLICT',
    tag: 'Zones',
    auth: 'bearer',
    params: venueParams,
    body: createZoneBody,
    responses: { 201: { description: 'The new zone', schema: zone } },
    errors: [...venueErrors, 409],
  },
  {
    method: 'get',
    path: '/api/venues/{id}/zones/{zoneId}',
    summary: 'One active zone of the venue (a zone of another venue is a 404)',
    tag: 'Zones',
    auth: 'bearer',
    params: zoneParams,
    responses: { 200: { description: 'The zone', schema: zone } },
    errors: venueErrors,
  },
  {
    method: 'put',
    path: '/api/venues/{id}/zones/{zoneId}',
    summary: 'Change any subset of slug, name, type, capacity (null clears capacity); server-owned fields are a 400',
    tag: 'Zones',
    auth: 'bearer',
    params: zoneParams,
    body: updateZoneBody,
    responses: { 200: { description: 'The updated zone', schema: zone } },
    errors: [...venueErrors, 409],
  },
  {
    method: 'delete',
    path: '/api/venues/{id}/zones/{zoneId}',
    summary: 'Soft delete: the zone leaves lists, later access is a 404 and its slug can be reused',
    tag: 'Zones',
    auth: 'bearer',
    params: zoneParams,
    responses: { 200: { description: 'The zone is inactive', schema: deletedResponse } },
    errors: venueErrors,
  },
];
