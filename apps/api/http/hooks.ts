import Router from '@koa/router';
import type { Context } from 'koa';
import type { RateLimiter } from '../../../domain/limits/rate-limit.js';
import { sourceIntegration } from '../../../domain/integrations/sources.js';
import {
  deliveryLimiter,
  IntegrationCache,
  receiveDelivery,
  WEBHOOK_DELIVERIES_PER_MINUTE,
  INTEGRATION_CACHE_TTL_MS,
  type ReceiverDeps,
} from '../../../domain/ingest/receivers/index.js';
import type { JsonSchema } from '../../../lib/json-schema.js';
import { ingestDepsOf, type ApiDeps } from '../deps.js';
import { limitingFailures } from '../middleware/auth.js';
import { readRawText } from '../middleware/body.js';
import { countIngest } from '../metrics.js';

/**
 * Vendor webhook receivers: `GET|POST /hooks/{integration_id}`, outside `/api` and without an API
 * key (the vendor's own mechanism authenticates; domain/ingest/receivers). Thin: the raw body, the
 * request's logger, the metric; errors go through the error middleware as envelopes. A refused
 * signature or secret counts against the caller address's budget of unauthenticated requests
 * (429 past it), as a refused API key does.
 */
export const HOOKS_PATH = '/hooks/{integration_id}';

export function hooksRouter(deps: ApiDeps, limiter: RateLimiter | undefined): Router {
  const { cfg, db, redis } = deps.services;
  const integrations = new IntegrationCache((id) => sourceIntegration(db, deps.keyring, id));
  const perIntegration = cfg.RATE_LIMITS_ENABLED ? deliveryLimiter(redis) : undefined;
  const router = new Router();

  const receive = async (ctx: Context) => {
    const integrationId = String(ctx.params.integration_id);
    const receiverDeps: ReceiverDeps = {
      ingest: ingestDepsOf(deps, ctx.state.log),
      integrations,
      limiter: perIntegration,
      observe: (connector, outcome) => deps.metrics.webhookDeliveries.inc({ connector, outcome }),
    };
    const answer = await limitingFailures(limiter, ctx, () =>
      receiveDelivery(receiverDeps, integrationId, {
        method: ctx.method,
        headers: ctx.headers,
        rawBody: () => readRawText(ctx),
        now: new Date(),
      }),
    );
    ctx.status = 200;
    if (answer.kind === 'text') {
      ctx.type = 'text/plain';
      ctx.body = answer.text;
      return;
    }
    for (const result of answer.results) countIngest(deps.metrics, result);
    ctx.body = answer.body;
  };
  router.get('/hooks/:integration_id', receive);
  router.post('/hooks/:integration_id', receive);
  return router;
}

/** The receivers in /openapi.json, added to the generated paths (they are not operations: they read the raw body). */
export function hooksOpenApiPaths(): Record<string, Record<string, JsonSchema>> {
  const param = {
    name: 'integration_id',
    in: 'path',
    required: true,
    description: 'the integration the vendor delivers for (its id)',
    schema: { type: 'string', format: 'uuid' },
  };
  const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, { $ref: `#/components/responses/Error${s}` }]));
  const taken = {
    description: 'the delivery was taken (even when ingest rejected some of its events one by one: a retry would not help)',
    content: {
      'application/json': {
        schema: {
          type: 'object',
          required: ['accepted', 'rejected', 'ignored'],
          properties: {
            accepted: { type: 'integer', description: 'events accepted by ingest' },
            rejected: { type: 'integer', description: 'events ingest rejected (reasons as for POST /ingest, logged at debug)' },
            ignored: {
              type: 'integer',
              description:
                'parts of the delivery deliberately not stored (another Square location, a Verkada webhook type without telemetry, the same Meraki sighting twice)',
            },
          },
        },
      },
    },
  };
  return {
    [HOOKS_PATH]: {
      get: {
        operationId: 'getWebhookValidator',
        summary: "Meraki's validation request: answers the integration's configured validator as text/plain (other connectors: 404)",
        tags: ['Webhooks'],
        security: [],
        parameters: [param],
        responses: {
          200: { description: 'the validator', content: { 'text/plain': { schema: { type: 'string' } } } },
          ...errors(404, 500),
        },
      },
      post: {
        operationId: 'receiveWebhook',
        summary:
          `A vendor webhook delivery (Meraki Scanning API v2/v3, Verkada, Square, Density) in the vendor's own format, authenticated by the vendor's ` +
          `mechanism (Meraki body secret, Verkada-Signature, x-square-hmacsha256-signature, Density custom header); at most ${WEBHOOK_DELIVERIES_PER_MINUTE} ` +
          `deliveries per integration per minute; integration changes take effect within ${INTEGRATION_CACHE_TTL_MS / 1000} s (docs/connectors/)`,
        tags: ['Webhooks'],
        security: [],
        parameters: [param],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { type: 'object', description: "the vendor's webhook body, signed as sent" } } },
        },
        responses: { 200: taken, ...errors(400, 401, 404, 413, 415, 429, 500, 503) },
      },
    },
  };
}

export const HOOKS_TAG = {
  name: 'Webhooks',
  description: "Vendor webhook receivers, one URL per integration, authenticated by the vendor's own mechanism",
};
