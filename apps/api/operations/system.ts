import { z } from 'zod';
import { getHealth, toStatus } from '../../../domain/system/health.js';
import { openApiDocument } from '../http/openapi.js';
import { operation, Reply } from './operation.js';

const member = z.object({ connected: z.boolean(), latencyMs: z.number(), error: z.string().optional() });
const health = z.object({
  status: z.enum(['healthy', 'degraded', 'unhealthy']),
  db: member,
  redis: member.extend({
    mode: z.enum(['shared', 'local-fallback']).describe('local-fallback: Redis unreachable, rate limits counted per instance'),
  }),
  kafka: member,
  clickhouse: member,
  stats: z.object({
    lastEventAt: z.iso.datetime().nullable(),
    operatorCount: z.number().int(),
    venueCount: z.number().int(),
    eventsPerMin: z.number(),
  }),
  uptime: z.number().int().describe('seconds since this instance started'),
});
const status = z.object({
  status: z.enum(['operational', 'degraded', 'outage']),
  eventsPerMin: z.number(),
  venueCount: z.number().int(),
  uptime: z.number().int(),
  checkedAt: z.iso.datetime(),
});

/** Public endpoints: never authenticated, never rate limited. */
export const systemOperations = [
  operation({
    id: 'getHealth',
    method: 'get',
    path: '/health',
    summary: 'Health of this instance and every engine it uses',
    tag: 'System',
    auth: 'public',
    response: { status: 200, description: 'healthy, or degraded while an engine other than Postgres is away', schema: health },
    // 503 carries the health document itself (not the error envelope), for load balancers.
    otherResponses: { 503: { description: 'unhealthy: Postgres unreachable', schema: health } },
    errors: [],
    handler: async (_input, { deps }) => {
      const h = await getHealth(deps.services, deps.throughput);
      return h.status === 'unhealthy' ? new Reply(503, h) : h;
    },
  }),
  operation({
    id: 'getStatus',
    method: 'get',
    path: '/api/status',
    summary: 'Public service status, without infrastructure internals',
    tag: 'System',
    auth: 'public',
    response: { status: 200, description: 'current status', schema: status },
    errors: [],
    handler: async (_input, { deps }) => toStatus(await getHealth(deps.services, deps.throughput)),
  }),
  operation({
    id: 'getOpenApi',
    method: 'get',
    path: '/openapi.json',
    summary: 'This OpenAPI 3.1 document',
    tag: 'System',
    auth: 'public',
    response: { status: 200, description: 'the OpenAPI document' },
    errors: [],
    handler: async (_input, { deps, operations }) => openApiDocument(deps.services.cfg.PUBLIC_URL, operations),
  }),
];
