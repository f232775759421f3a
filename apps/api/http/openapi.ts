import { z } from 'zod';
import { jsonSchema, type JsonSchema } from '../../../lib/json-schema.js';
import type { ErrorCode } from '../../../lib/errors.js';
import { RATE_LIMITS } from '../../../domain/limits/rate-limit.js';
import { MAX_JSON_DEPTH } from '../../../lib/validate.js';
import { MAX_BODY_BYTES } from '../middleware/body.js';
import { TAGS, type AnyOperation } from '../operations/operation.js';
import { MCP_PATH } from '../mcp/transport.js';
import { HOOKS_TAG, hooksOpenApiPaths } from './hooks.js';

/** Every error code with its meaning; a Record so that a code added to ErrorCode must be added here. */
const ERROR_MEANINGS: Record<ErrorCode, string> = {
  UNAUTHORIZED: 'missing, malformed, unknown or rotated API key, or wrong X-Admin-Key',
  FORBIDDEN: 'valid key, resource owned by another operator',
  NOT_FOUND: 'resource absent or soft-deleted, or no such route',
  VALIDATION_ERROR: 'body, query or path failed validation; `details` lists each bad field',
  CONFLICT: 'the resource already exists or changed meanwhile',
  PAYLOAD_TOO_LARGE: `request body over ${MAX_BODY_BYTES} bytes`,
  UNSUPPORTED_MEDIA_TYPE: 'a Content-Encoding or charset other than identity / UTF-8',
  METHOD_NOT_ALLOWED: 'the path exists but not with this method (the Allow header lists the methods)',
  RATE_LIMITED:
    'per-operator rate limit reached, or too many requests without a valid key from one address; retry after Retry-After seconds',
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
  .describe(
    Object.entries(ERROR_MEANINGS)
      .map(([code, meaning]) => `${code}: ${meaning}`)
      .join('\n'),
  );

const ERROR_STATUSES: Record<number, string> = {
  400: `VALIDATION_ERROR: invalid JSON (or nested deeper than ${MAX_JSON_DEPTH}), content type, body, query or path parameter`,
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN or PLAN_LIMIT_REACHED',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  409: 'CONFLICT, ALREADY_ACKNOWLEDGED or ALREADY_CLEARED',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'RATE_LIMITED or QUOTA_EXCEEDED',
  500: 'INTERNAL_ERROR',
  503: 'SERVICE_UNAVAILABLE',
};

/** Error statuses every operation of a kind can answer, added to the ones it declares. */
function impliedErrors(op: AnyOperation): number[] {
  const out = [500];
  if (op.auth === 'bearer') out.push(401, 429);
  // Past the budget of failed authentications per address, 429 instead of 401.
  if (op.auth === 'admin') out.push(401, 429);
  if (op.params || op.query || op.body) out.push(400);
  if (op.body) out.push(413, 415);
  return out;
}

function parameters(where: 'path' | 'query' | 'header', schema: z.ZodObject | undefined): JsonSchema[] {
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

function operation(op: AnyOperation): JsonSchema {
  const rateHeaders =
    op.auth === 'bearer'
      ? {
          'RateLimit-Limit': { $ref: '#/components/headers/RateLimit-Limit' },
          'RateLimit-Remaining': { $ref: '#/components/headers/RateLimit-Remaining' },
          'RateLimit-Reset': { $ref: '#/components/headers/RateLimit-Reset' },
        }
      : undefined;
  const responses: Record<string, JsonSchema> = {};
  for (const [status, r] of Object.entries({ [op.response.status]: op.response, ...op.otherResponses })) {
    responses[status] = {
      description: r.description,
      ...(rateHeaders ? { headers: rateHeaders } : {}),
      ...(r.schema ? { content: { 'application/json': { schema: jsonSchema(r.schema, 'output') } } } : {}),
    };
  }
  for (const status of [...new Set([...op.errors, ...impliedErrors(op)])].sort((a, b) => a - b)) {
    responses[status] = { $ref: `#/components/responses/Error${status}` };
  }
  const body = op.bodyDoc ?? op.body;
  return {
    operationId: op.id,
    summary: op.summary,
    tags: [op.tag],
    security: op.auth === 'bearer' ? [{ bearerAuth: [] }] : op.auth === 'admin' ? [{ adminKey: [] }] : [],
    parameters: [...parameters('path', op.params), ...parameters('query', op.query), ...parameters('header', op.headers)],
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(body, 'input') } } } } : {}),
    responses,
  };
}

/** The MCP transport: JSON-RPC over Streamable HTTP (docs/mcp.md), with the same key and limits as REST. */
function mcpOperation(): JsonSchema {
  const rpc = {
    type: 'object',
    required: ['jsonrpc'],
    properties: { jsonrpc: { const: '2.0' }, id: { type: ['string', 'integer'] }, method: { type: 'string' } },
  };
  return {
    operationId: 'mcp',
    summary:
      'Model Context Protocol (Streamable HTTP, stateless): initialize, tools/list, tools/call; each tools/call counts as one MCP query',
    tags: ['MCP'],
    security: [{ bearerAuth: [] }],
    parameters: [],
    requestBody: { required: true, content: { 'application/json': { schema: rpc } } },
    responses: {
      200: {
        description: 'the JSON-RPC answer; tool failures are results with isError true',
        content: { 'application/json': { schema: rpc } },
      },
      202: { description: 'a notification was accepted' },
      ...Object.fromEntries([400, 401, 413, 415, 429, 500].map((status) => [status, { $ref: `#/components/responses/Error${status}` }])),
    },
  };
}

function buildOpenApi(operations: readonly AnyOperation[], serverUrl: string): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const op of operations) (paths[op.path] ??= {})[op.method] = operation(op);
  paths[MCP_PATH] = { post: mcpOperation() };
  // Vendor webhook receivers (http/hooks.ts): not operations, as they read the raw body.
  Object.assign(paths, hooksOpenApiPaths());
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
    tags: [
      ...[...new Set(operations.map((op) => op.tag))].map((name) => ({ name, description: TAGS[name] })),
      { name: 'MCP', description: 'Tools for AI agents over the Model Context Protocol' },
      HOOKS_TAG,
    ],
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

export function openApiDocument(serverUrl: string, operations: readonly AnyOperation[]): JsonSchema {
  if (cached?.url !== serverUrl) cached = { url: serverUrl, doc: buildOpenApi(operations, serverUrl) };
  return cached.doc;
}
