import type Router from '@koa/router';
import { z } from 'zod';
import { CONNECTOR_TYPES, EVENT_TYPES } from '../../../lib/events.js';
import { parseInput } from '../../../lib/validate.js';
import { ingestBatch, MAX_EVENTS_PER_REQUEST } from '../../../domain/ingest/ingest.js';
import { Pseudonyms } from '../../../domain/ingest/pseudonyms.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';
import { authedRouter } from './authed.js';

/** Events are only counted here; each one is validated on its own so one bad event never fails the batch. */
const ingestBody = z.object({
  venue_id: z.uuid(),
  connector_type: z.enum(CONNECTOR_TYPES),
  events: z
    .array(z.unknown())
    .min(1, 'events must hold at least 1 event')
    .max(MAX_EVENTS_PER_REQUEST, `events must hold at most ${MAX_EVENTS_PER_REQUEST.toLocaleString('en-US')} events per request`),
});

const ingestEventDoc = z.object({
  type: z.enum(EVENT_TYPES).describe('an event type accepted by the connector (docs/events.md)'),
  timestamp: z.string().describe('ISO 8601 date-time with a time zone, e.g. 2025-06-01T12:00:00Z'),
  payload: z.record(z.string(), z.unknown()).describe('connector-specific fields (docs/events.md)'),
});

const ingestResult = z.object({
  accepted: z.int(),
  rejected: z.int(),
  errors: z.array(z.object({ index: z.int().describe('position in events'), reason: z.string() })),
});

export const docs: RouteDoc[] = [
  {
    method: 'post',
    path: '/ingest',
    summary: 'Ingest a batch of up to 1,000 connector events for one venue; answered after the event stream acknowledged them',
    tag: 'Ingest',
    auth: 'bearer',
    body: ingestBody.extend({ events: z.array(ingestEventDoc).min(1).max(MAX_EVENTS_PER_REQUEST) }),
    responses: { 202: { description: 'accepted and rejected counts, with the reason for each rejected event', schema: ingestResult } },
    errors: [403, 404, 503],
  },
];

export function ingestRoutes(deps: ApiDeps): Router {
  const { services } = deps;
  const ingestDeps = {
    db: services.db,
    publisher: services.publisher,
    topic: services.topics.events,
    pseudonyms: new Pseudonyms(services.cfg.PSEUDONYM_KEY),
    throughput: deps.throughput,
    log: services.log.child({ component: 'ingest' }),
  };
  const router = authedRouter(deps);
  router.post('/ingest', async (ctx) => {
    const input = parseInput(ingestBody, ctx.request.body ?? {}, 'body');
    const result = await ingestBatch(ingestDeps, {
      operator: ctx.state.operator,
      venueId: input.venue_id,
      connectorType: input.connector_type,
      events: input.events,
    });
    ctx.status = 202;
    ctx.body = result;
  });
  return router;
}
