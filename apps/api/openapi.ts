import { z } from 'zod';
import type { ErrorCode } from '../../lib/errors.js';
import { RATE_LIMITS } from '../../domain/limits/rate-limit.js';
import { MAX_BODY_BYTES } from './middleware/body.js';
import type { RouteDoc } from './route-docs.js';
import { docs as systemDocs } from './routes/system.js';
import { docs as openapiDocs } from './routes/openapi.js';
import { docs as operatorDocs } from './routes/operators.js';
import { docs as keyDocs } from './routes/keys.js';
import { docs as usageDocs } from './routes/usage.js';
import { docs as venueDocs } from './routes/venues.js';
import { docs as zoneDocs } from './routes/zones.js';
import { docs as integrationDocs } from './routes/integrations.js';
import { docs as ingestDocs } from './routes/ingest.js';
import { docs as telemetryDocs } from './routes/telemetry.js';
import { docs as dashboardDocs } from './routes/dashboard.js';

/**
 * The OpenAPI 3.1 document, generated from the zod schemas the routes parse with. The rule: every
 * module in routes/ exports `docs: RouteDoc[]`, and this list names each module once (a test
 * compares it with the routers' registered routes). A function, not a constant: route modules
 * import this file, so the list is read only after every module has loaded.
 */
export function routeDocs(): RouteDoc[] {
  return [...systemDocs, ...openapiDocs, ...operatorDocs, ...keyDocs, ...usageDocs, ...venueDocs, ...zoneDocs, ...integrationDocs, ...ingestDocs, ...telemetryDocs, ...dashboardDocs];
}

/** Every error code with its meaning; a Record so that a code added to ErrorCode must be added here. */
const ERROR_MEANINGS: Record<ErrorCode, string> = {
  UNAUTHORIZED: 'missing, malformed, unknown or rotated API key, or wrong X-Admin-Key',
  FORBIDDEN: 'valid key, resource owned by another operator',
  NOT_FOUND: 'resource absent or soft-deleted, or no such route',
  VALIDATION_ERROR: 'body, query or path failed validation; `details` lists each bad field',
  CONFLICT: 'the resource already exists or changed meanwhile',
  PAYLOAD_TOO_LARGE: `request body over ${MAX_BODY_BYTES} bytes`,
  METHOD_NOT_ALLOWED: 'the path exists but not with this method (the Allow header lists the methods)',
  RATE_LIMITED: 'per-operator rate limit reached; retry after Retry-After seconds',
  QUOTA_EXCEEDED: "Free plan's monthly quota used up; Retry-After is the time to the next billing period",
  PLAN_LIMIT_REACHED: "the plan's limit (e.g. max venues) is reached; upgrade the plan",
  ALREADY_ACKNOWLEDGED: 'the alarm is already acknowledged',
  ALREADY_CLEARED: 'the alarm is already cleared',
  SERVICE_UNAVAILABLE: 'a required engine is unavailable; retry after Retry-After seconds',
  INTERNAL_ERROR: 'unexpected; retryable after a short delay',
};

export const errorEnvelope = z
  .object({
    error: z.string().describe('human-readable message'),
    code: z.enum(Object.keys(ERROR_MEANINGS) as [ErrorCode, ...ErrorCode[]]),
    details: z.unknown().optional().describe('for VALIDATION_ERROR an array of {field, message}'),
  })
  .describe(Object.entries(ERROR_MEANINGS).map(([code, meaning]) => `${code}: ${meaning}`).join('\n'));

const ERROR_STATUSES: Record<number, string> = {
  400: 'VALIDATION_ERROR: invalid JSON, content type, body, query or path parameter',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN or PLAN_LIMIT_REACHED',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  409: 'CONFLICT, ALREADY_ACKNOWLEDGED or ALREADY_CLEARED',
  413: 'PAYLOAD_TOO_LARGE',
  429: 'RATE_LIMITED or QUOTA_EXCEEDED',
  500: 'INTERNAL_ERROR',
  503: 'SERVICE_UNAVAILABLE',
};

/** Error statuses every route of a kind can answer, added to the ones its doc lists. */
function impliedErrors(d: RouteDoc): number[] {
  const out = [500];
  if (d.auth === 'bearer') out.push(401, 429);
  if (d.auth === 'admin') out.push(401);
  if (d.params || d.query || d.body) out.push(400);
  if (d.body) out.push(413);
  return out;
}

type JsonSchema = Record<string, unknown>;

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  // OpenAPI 3.1 schemas are JSON Schema 2020-12; `$schema` is implied by the document.
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

function parameters(where: 'path' | 'query', schema: z.ZodObject | undefined): JsonSchema[] {
  if (!schema) return [];
  const object = jsonSchema(schema, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(object.properties ?? {}).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (object.required ?? []).includes(name),
    ...(typeof property.description === 'string' ? { description: property.description } : {}),
    schema: property,
  }));
}

const header = (description: string) => ({ description, schema: { type: 'integer' } });

function operation(d: RouteDoc): JsonSchema {
  const rateHeaders =
    d.auth === 'bearer'
      ? {
          'RateLimit-Limit': { $ref: '#/components/headers/RateLimit-Limit' },
          'RateLimit-Remaining': { $ref: '#/components/headers/RateLimit-Remaining' },
          'RateLimit-Reset': { $ref: '#/components/headers/RateLimit-Reset' },
        }
      : undefined;
  const responses: Record<string, JsonSchema> = {};
  for (const [status, r] of Object.entries(d.responses)) {
    responses[status] = {
      description: r.description,
      ...(rateHeaders ? { headers: rateHeaders } : {}),
      ...(r.schema ? { content: { 'application/json': { schema: jsonSchema(r.schema, 'output') } } } : {}),
    };
  }
  for (const status of [...new Set([...d.errors, ...impliedErrors(d)])].sort((a, b) => a - b)) {
    responses[status] = { $ref: `#/components/responses/Error${status}` };
  }
  return {
    operationId: `${d.method}${d.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
    summary: d.summary,
    tags: [d.tag],
    security: d.auth === 'bearer' ? [{ bearerAuth: [] }] : d.auth === 'admin' ? [{ adminKey: [] }] : [],
    parameters: [...parameters('path', d.params), ...parameters('query', d.query)],
    ...(d.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(d.body, 'input') } } } } : {}),
    responses,
  };
}

function buildOpenApi(docs: RouteDoc[], serverUrl: string): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const d of docs) (paths[d.path] ??= {})[d.method] = operation(d);
  const errorResponses: Record<string, JsonSchema> = {};
  for (const [status, description] of Object.entries(ERROR_STATUSES)) {
    errorResponses[`Error${status}`] = {
      description,
      ...(status === '429' || status === '503' ? { headers: { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } } : {}),
      ...(status === '405' ? { headers: { Allow: { description: 'the methods this path accepts', schema: { type: 'string' } } } } : {}),
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Venue Occupancy and Telemetry API',
      version: '1',
      description:
        `Multi-tenant venue analytics. Authenticate with \`Authorization: Bearer <API_KEY>\`. Rate limits per operator: ` +
        `${RATE_LIMITS.ingest}/min on POST /ingest, ${RATE_LIMITS.api}/min on the rest of the authenticated API. ` +
        'Every error is `{error, code, details?}`.',
    },
    servers: [{ url: serverUrl }],
    security: [{ bearerAuth: [] }],
    tags: [...new Set(docs.map((d) => d.tag))].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'the operator API key (vt_live_ followed by 28 characters)' },
        adminKey: { type: 'apiKey', in: 'header', name: 'X-Admin-Key', description: 'the ADMIN_SECRET, for /api/operators endpoints' },
      },
      schemas: { Error: jsonSchema(errorEnvelope, 'output') },
      responses: errorResponses,
      headers: {
        'RateLimit-Limit': header('requests allowed in the current 60 s window'),
        'RateLimit-Remaining': header('requests left in the current window'),
        'RateLimit-Reset': header('seconds until the window resets'),
        'Retry-After': header('seconds to wait before retrying'),
      },
    },
  };
}

let cached: { url: string; doc: JsonSchema } | undefined;

export function openApiDocument(serverUrl: string): JsonSchema {
  if (cached?.url !== serverUrl) cached = { url: serverUrl, doc: buildOpenApi(routeDocs(), serverUrl) };
  return cached.doc;
}
