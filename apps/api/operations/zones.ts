import { z } from 'zod';
import { createZone, deleteZone, getZone, listZones, updateZone, ZONE_SLUG, ZONE_TYPES } from '../../../domain/zones/zones.js';
import { displayText } from '../../../lib/validate.js';
import { operation } from './operation.js';
import { deletedResponse, serverOwned, timestamp, VENUE_ERRORS, venueParams, zoneParams } from './schemas.js';

const zoneFields = {
  slug: z.string().max(64).regex(ZONE_SLUG, 'URL-safe: lower-case letters and digits, words joined by single "-"'),
  name: displayText(200),
  type: z.enum(ZONE_TYPES),
  capacity: z.number().min(0).nullable().optional(),
};

const serverFields = serverOwned({
  venue_id: 'venue_id is immutable: a zone cannot move to another venue',
  is_active: 'read-only field; DELETE the zone to deactivate it',
});

const createZoneBody = z.strictObject({ ...zoneFields, ...serverFields });

const updateZoneBody = z
  .strictObject({
    ...zoneFields,
    slug: zoneFields.slug.optional(),
    name: zoneFields.name.optional(),
    type: zoneFields.type.optional(),
    ...serverFields,
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), 'send at least one of slug, name, type, capacity');

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

/** Zones of a venue; every operation checks zone → venue → operator. */
export const zoneOperations = [
  operation({
    id: 'listZones',
    method: 'get',
    path: '/api/venues/{id}/zones',
    summary: "The venue's active zones, oldest first",
    tag: 'Zones',
    auth: 'bearer',
    params: venueParams,
    response: {
      status: 200,
      description: 'Active zones',
      schema: z.object({
        data: z.array(zone.pick({ id: true, slug: true, name: true, type: true, capacity: true, is_active: true })),
        total: z.number().int(),
      }),
    },
    errors: VENUE_ERRORS,
    handler: ({ params }, { deps, operator }) => listZones(deps.services.db, operator.id, params.id),
  }),
  operation({
    id: 'createZone',
    method: 'post',
    path: '/api/venues/{id}/zones',
    summary: 'Create a zone; a slug already used by an active zone of the venue is a 409 CONFLICT',
    tag: 'Zones',
    auth: 'bearer',
    params: venueParams,
    body: createZoneBody,
    response: { status: 201, description: 'The new zone', schema: zone },
    errors: [...VENUE_ERRORS, 409],
    handler: ({ params, body }, { deps, operator }) => createZone(deps.services.db, operator.id, params.id, body),
  }),
  operation({
    id: 'getZone',
    method: 'get',
    path: '/api/venues/{id}/zones/{zoneId}',
    summary: 'One active zone of the venue (a zone of another venue is a 404)',
    tag: 'Zones',
    auth: 'bearer',
    params: zoneParams,
    response: { status: 200, description: 'The zone', schema: zone },
    errors: VENUE_ERRORS,
    handler: ({ params }, { deps, operator }) => getZone(deps.services.db, operator.id, params.id, params.zoneId),
  }),
  operation({
    id: 'updateZone',
    method: 'put',
    path: '/api/venues/{id}/zones/{zoneId}',
    summary: 'Change any subset of slug, name, type, capacity (null clears capacity); server-owned fields are a 400',
    tag: 'Zones',
    auth: 'bearer',
    params: zoneParams,
    body: updateZoneBody,
    response: { status: 200, description: 'The updated zone', schema: zone },
    errors: [...VENUE_ERRORS, 409],
    handler: ({ params, body }, { deps, operator }) => updateZone(deps.services.db, operator.id, params.id, params.zoneId, body),
  }),
  operation({
    id: 'deleteZone',
    method: 'delete',
    path: '/api/venues/{id}/zones/{zoneId}',
    summary: 'Soft delete: the zone leaves lists, later access is a 404 and its slug can be reused',
    tag: 'Zones',
    auth: 'bearer',
    params: zoneParams,
    response: { status: 200, description: 'The zone is inactive', schema: deletedResponse },
    errors: VENUE_ERRORS,
    handler: ({ params }, { deps, operator }) => deleteZone(deps.services.db, operator.id, params.id, params.zoneId),
  }),
];
