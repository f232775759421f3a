import { z } from 'zod';
import {
  createVenue,
  deleteVenue,
  getVenue,
  HARDWARE_TYPES,
  ianaTimezone,
  listVenues,
  updateVenue,
} from '../../../domain/venues/venues.js';
import { ZONE_TYPES } from '../../../domain/zones/zones.js';
import { CONNECTOR_TYPES } from '../../../lib/events/vocabulary.js';
import { displayText } from '../../../lib/validate.js';
import { operation } from './operation.js';
import { deletedResponse, pageQuery, serverOwned, timestamp, VENUE_ERRORS, venueParams } from './schemas.js';

const timezone = z
  .string()
  .max(64)
  .refine((v) => ianaTimezone(v) !== undefined, 'must be an IANA time zone name such as Europe/Berlin or UTC')
  .describe('IANA time zone name (canonical or link), e.g. Europe/Berlin or UTC; offsets are not accepted');

const venueFields = {
  name: displayText(200),
  timezone,
  address: displayText(500).nullable().optional(),
  lat: z.number().min(-90).max(90).nullable().optional(),
  lng: z.number().min(-180).max(180).nullable().optional(),
  hardware_type: z.enum(HARDWARE_TYPES).nullable().optional().describe('the connector types, or other'),
  occupancy_reset_hour: z
    .number()
    .int('must be a whole hour')
    .min(0)
    .max(23)
    .optional()
    .describe('venue-local hour (0-23, default 4) at which live occupancy is reset to 0, when the venue is empty (docs/processors.md)'),
};

const serverFields = serverOwned({
  operator_id: 'operator_id is immutable: a venue cannot move to another operator',
  is_active: 'read-only field; DELETE /api/venues/{id} deactivates a venue',
});

const createVenueBody = z.strictObject({ ...venueFields, ...serverFields });

const updateVenueBody = z
  .strictObject({ ...venueFields, name: venueFields.name.optional(), timezone: timezone.optional(), ...serverFields })
  .refine(
    (b) => Object.values(b).some((v) => v !== undefined),
    'send at least one of name, timezone, address, lat, lng, hardware_type, occupancy_reset_hour',
  );

const venue = z.object({
  id: z.uuid(),
  operator_id: z.uuid(),
  name: z.string(),
  timezone: z.string(),
  address: z.string().nullable(),
  lat: z.number().nullable(),
  lng: z.number().nullable(),
  hardware_type: z.enum(HARDWARE_TYPES).nullable(),
  occupancy_reset_hour: z.number().int(),
  is_active: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});

const venueList = z.object({
  data: z.array(venue.extend({ zone_count: z.number().int(), last_event_at: timestamp.nullable() })),
  total: z.number().int(),
  limit: z.number().int(),
  offset: z.number().int(),
});

const venueDetail = venue.extend({
  zones: z.array(z.object({ id: z.uuid(), slug: z.string(), name: z.string(), type: z.enum(ZONE_TYPES), capacity: z.number().nullable() })),
  integrations: z.array(z.object({ id: z.uuid(), connector_type: z.enum(CONNECTOR_TYPES), is_active: z.boolean(), created_at: timestamp })),
});

export const venueOperations = [
  operation({
    id: 'listVenues',
    method: 'get',
    path: '/api/venues',
    summary: "List the caller's active venues, oldest first (limit above 200 is a 400, not clamped)",
    tag: 'Venues',
    auth: 'bearer',
    query: pageQuery,
    response: { status: 200, description: 'A page of venues', schema: venueList },
    errors: [400, 401, 429],
    tool: {
      name: 'list_venues',
      description:
        "Lists the caller's active venues (id, name, IANA time zone, address, coordinates, zone count, time of the last event), oldest first, a page at a time (limit 1-200, default 50; offset). Use a venue's id with the other tools.",
    },
    handler: ({ query }, { deps, operator }) => listVenues(deps.services.db, operator.id, query),
  }),
  operation({
    id: 'createVenue',
    method: 'post',
    path: '/api/venues',
    summary: `Create a venue. hardware_type: ${CONNECTOR_TYPES.join(', ')} or other. 403 PLAN_LIMIT_REACHED at the plan's venue limit`,
    tag: 'Venues',
    auth: 'bearer',
    body: createVenueBody,
    response: {
      status: 201,
      description: 'The new venue',
      schema: venue.pick({ id: true, name: true, timezone: true, is_active: true, operator_id: true, created_at: true }),
    },
    errors: [400, 401, 403, 429],
    handler: ({ body }, { deps, operator }) => createVenue(deps.services.db, operator.id, body),
  }),
  operation({
    id: 'getVenue',
    method: 'get',
    path: '/api/venues/{id}',
    summary: 'A venue with its active zones and its (not deleted) integrations',
    tag: 'Venues',
    auth: 'bearer',
    params: venueParams,
    response: { status: 200, description: 'The venue', schema: venueDetail },
    errors: VENUE_ERRORS,
    tool: {
      name: 'get_venue',
      description:
        'One venue of the caller: name, IANA time zone (all local times of the venue are in it), address, coordinates, its active zones (id, slug, name, type area/entrance/exit/counter, capacity in people or null) and its connector integrations.',
      rename: { id: 'venue_id' },
    },
    handler: ({ params }, { deps, operator }) => getVenue(deps.services.db, operator.id, params.id),
  }),
  operation({
    id: 'updateVenue',
    method: 'put',
    path: '/api/venues/{id}',
    summary: 'Change any subset of the venue fields (null clears an optional one); server-owned fields such as operator_id are a 400',
    tag: 'Venues',
    auth: 'bearer',
    params: venueParams,
    body: updateVenueBody,
    response: { status: 200, description: 'The updated venue', schema: venue },
    errors: VENUE_ERRORS,
    handler: ({ params, body }, { deps, operator }) => updateVenue(deps.services.db, operator.id, params.id, body),
  }),
  operation({
    id: 'deleteVenue',
    method: 'delete',
    path: '/api/venues/{id}',
    summary: 'Soft delete: the venue leaves lists and later reads are 404; its data, zones and integrations are kept',
    tag: 'Venues',
    auth: 'bearer',
    params: venueParams,
    response: { status: 200, description: 'The venue is inactive', schema: deletedResponse },
    errors: VENUE_ERRORS,
    handler: ({ params }, { deps, operator }) => deleteVenue(deps.services.db, operator.id, params.id),
  }),
];
