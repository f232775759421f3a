import type Router from '@koa/router';
import { z } from 'zod';
import { createVenue, deleteVenue, getVenue, HARDWARE_TYPES, ianaTimezone, listVenues, updateVenue } from '../../../domain/venues/venues.js';
import { ZONE_TYPES } from '../../../domain/zones/zones.js';
import { CONNECTOR_TYPES } from '../../../lib/events.js';
import { nulFree, parseInput } from '../../../lib/validate.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';
import { authedRouter } from './authed.js';

/** Path ids are checked here, so a malformed id is a 400 rather than a failed uuid cast. */
export const venueParams = z.object({ id: z.uuid('must be a UUID') });

const pageQuery = z.object({
  limit: z.coerce.number().int('must be an integer').min(1, 'at least 1').max(200, 'at most 200').default(50),
  offset: z.coerce.number().int('must be an integer').min(0, 'must not be negative').default(0),
});

/** A field the server owns: present in a body it is a 400 naming it, not silently dropped. */
export const readOnly = (message = 'read-only field') => z.never({ error: message }).optional().describe(`not accepted: ${message}`);

const timezone = z
  .string()
  .max(64)
  .refine((v) => ianaTimezone(v) !== undefined, 'must be an IANA time zone name such as Europe/Berlin or UTC')
  .describe('IANA time zone name (canonical or link), e.g. Europe/Berlin or UTC; offsets are not accepted');

const venueFields = {
  name: nulFree(z.string().trim().min(1).max(200)),
  timezone,
  address: nulFree(z.string().trim().min(1).max(500)).nullable().optional(),
  lat: z.number().min(-90).max(90).nullable().optional(),
  lng: z.number().min(-180).max(180).nullable().optional(),
  hardware_type: z.enum(HARDWARE_TYPES).nullable().optional().describe('the connector types, or other'),
};

const serverFields = {
  id: readOnly(),
  operator_id: readOnly('operator_id is immutable: a venue cannot move to another operator'),
  is_active: readOnly('read-only field; DELETE /api/venues/{id} deactivates a venue'),
  created_at: readOnly(),
  updated_at: readOnly(),
  deleted_at: readOnly(),
};

const createVenueBody = z.strictObject({ ...venueFields, ...serverFields });

const updateVenueBody = z
  .strictObject({ ...venueFields, name: venueFields.name.optional(), timezone: timezone.optional(), ...serverFields })
  .refine((b) => Object.values(b).some((v) => v !== undefined), 'send at least one of name, timezone, address, lat, lng, hardware_type');

const timestamp = z.iso.datetime();
const venue = z.object({
  id: z.uuid(),
  operator_id: z.uuid(),
  name: z.string(),
  timezone: z.string(),
  address: z.string().nullable(),
  lat: z.number().nullable(),
  lng: z.number().nullable(),
  hardware_type: z.enum(HARDWARE_TYPES).nullable(),
  is_active: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});
export const deletedResponse = z.object({ id: z.uuid(), is_active: z.literal(false), deleted_at: timestamp });

export function venueRoutes(deps: ApiDeps): Router {
  const { db } = deps.services;
  const router = authedRouter(deps);
  router.get('/api/venues', async (ctx) => {
    const page = parseInput(pageQuery, ctx.query, 'query');
    ctx.body = await listVenues(db, ctx.state.operator.id, page);
  });
  router.post('/api/venues', async (ctx) => {
    const input = parseInput(createVenueBody, ctx.request.body ?? {}, 'body');
    ctx.status = 201;
    ctx.body = await createVenue(db, ctx.state.operator.id, input);
  });
  router.get('/api/venues/:id', async (ctx) => {
    const { id } = parseInput(venueParams, ctx.params, 'params');
    ctx.body = await getVenue(db, ctx.state.operator.id, id);
  });
  router.put('/api/venues/:id', async (ctx) => {
    const { id } = parseInput(venueParams, ctx.params, 'params');
    const patch = parseInput(updateVenueBody, ctx.request.body ?? {}, 'body');
    ctx.body = await updateVenue(db, ctx.state.operator.id, id, patch);
  });
  router.delete('/api/venues/:id', async (ctx) => {
    const { id } = parseInput(venueParams, ctx.params, 'params');
    ctx.body = await deleteVenue(db, ctx.state.operator.id, id);
  });
  return router;
}

export const docs: RouteDoc[] = [
  {
    method: 'get',
    path: '/api/venues',
    summary: "List the caller's active venues, oldest first (limit above 200 is a 400, not clamped)",
    tag: 'Venues',
    auth: 'bearer',
    query: pageQuery,
    responses: {
      200: {
        description: 'A page of venues',
        schema: z.object({
          data: z.array(venue.extend({ zone_count: z.number().int(), last_event_at: timestamp.nullable() })),
          total: z.number().int(),
          limit: z.number().int(),
          offset: z.number().int(),
        }),
      },
    },
    errors: [400, 401, 429],
  },
  {
    method: 'post',
    path: '/api/venues',
    summary: `Create a venue. hardware_type: ${CONNECTOR_TYPES.join(', ')} or other. 403 PLAN_LIMIT_REACHED at the plan's venue limit`,
    tag: 'Venues',
    auth: 'bearer',
    body: createVenueBody,
    responses: {
      201: {
        description: 'The new venue',
        schema: venue.pick({ id: true, name: true, timezone: true, is_active: true, operator_id: true, created_at: true }),
      },
    },
    errors: [400, 401, 403, 429],
  },
  {
    method: 'get',
    path: '/api/venues/{id}',
    summary: 'A venue with its active zones and its (not deleted) integrations',
    tag: 'Venues',
    auth: 'bearer',
    params: venueParams,
    responses: {
      200: {
        description: 'The venue',
        schema: venue.extend({
          zones: z.array(z.object({ id: z.uuid(), slug: z.string(), name: z.string(), type: z.enum(ZONE_TYPES), capacity: z.number().nullable() })),
          integrations: z.array(z.object({ id: z.uuid(), connector_type: z.enum(CONNECTOR_TYPES), is_active: z.boolean(), created_at: timestamp })),
        }),
      },
    },
    errors: [400, 401, 403, 404, 429],
  },
  {
    method: 'put',
    path: '/api/venues/{id}',
    summary: 'Change any subset of the venue fields (null clears an optional one); server-owned fields such as operator_id are a 400',
    tag: 'Venues',
    auth: 'bearer',
    params: venueParams,
    body: updateVenueBody,
    responses: { 200: { description: 'The updated venue', schema: venue } },
    errors: [400, 401, 403, 404, 429],
  },
  {
    method: 'delete',
    path: '/api/venues/{id}',
    summary: 'Soft delete: the venue leaves lists and later reads are 404; its data, zones and integrations are kept',
    tag: 'Venues',
    auth: 'bearer',
    params: venueParams,
    responses: { 200: { description: 'The venue is inactive', schema: deletedResponse } },
    errors: [400, 401, 403, 404, 429],
  },
];
