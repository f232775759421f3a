import { z } from 'zod';
import { CONNECTOR_TYPES, EVENT_TYPES } from '../../../lib/events/vocabulary.js';
import { ingestDepsOf } from '../deps.js';
import { ingestBatch, MAX_EVENTS_PER_REQUEST } from '../../../domain/ingest/ingest.js';
import { IDEMPOTENCY_WINDOW_S } from '../../../domain/ingest/idempotency.js';
import { countIngest } from '../metrics.js';
import { operation, Reply } from './operation.js';

/**
 * Events are only counted here; each one is validated on its own so one bad event never fails the
 * batch. The body itself is strict: an unknown top-level key is a 400, as for every other body.
 */
const ingestBody = z.strictObject({
  venue_id: z.uuid(),
  connector_type: z.enum(CONNECTOR_TYPES),
  events: z
    .array(z.unknown())
    .min(1, 'events must hold at least 1 event')
    .max(MAX_EVENTS_PER_REQUEST, `events must hold at most ${MAX_EVENTS_PER_REQUEST.toLocaleString('en-US')} events per request`),
});

const ingestHeaders = z.object({
  'idempotency-key': z
    .string()
    .regex(/^[\x21-\x7e]{1,255}$/, 'must be 1 to 255 printable ASCII characters, e.g. a UUID')
    .optional()
    .describe(
      `makes a retry safe: the same key with the same body within ${IDEMPOTENCY_WINDOW_S / 3600} h gets the first answer again ` +
        '(header Idempotent-Replayed: true) and nothing is stored twice; the same key with another body is a 409',
    ),
});

const ingestEventDoc = z.strictObject({
  event_id: z
    .string()
    .max(128)
    .optional()
    .describe("the event's own id (1 to 128 printable ASCII): an event sent again with the same id is stored once"),
  type: z.enum(EVENT_TYPES).describe('an event type accepted by the connector (docs/events.md)'),
  timestamp: z.string().describe('ISO 8601 date-time with a time zone, e.g. 2025-06-01T12:00:00Z'),
  payload: z.record(z.string(), z.unknown()).describe('connector-specific fields (docs/events.md)'),
});

const ingestResult = z.object({
  accepted: z.int(),
  rejected: z.int(),
  errors: z.array(z.object({ index: z.int().describe('position in events'), reason: z.string() })),
});

export const ingestOperations = [
  operation({
    id: 'ingest',
    method: 'post',
    path: '/ingest',
    summary: 'Ingest a batch of up to 1,000 connector events for one venue; answered after the event stream acknowledged them',
    tag: 'Ingest',
    auth: 'bearer',
    // Its own, smaller rate bucket; metered per accepted event by the domain, not as an API call.
    metering: { rate: 'ingest', quota: 'none' },
    body: ingestBody,
    // Any text is safe in payload strings (they travel JSON-escaped); each event is checked on its own.
    checkedPerItem: 'events',
    bodyDoc: ingestBody.extend({ events: z.array(ingestEventDoc).min(1).max(MAX_EVENTS_PER_REQUEST) }),
    response: { status: 202, description: 'accepted and rejected counts, with the reason for each rejected event', schema: ingestResult },
    headers: ingestHeaders,
    errors: [403, 404, 409, 503],
    handler: async ({ body, headers, bodyText }, { deps, operator, log }) => {
      const { result, replayed } = await ingestBatch(ingestDepsOf(deps, log), {
        operator,
        venueId: body.venue_id,
        connectorType: body.connector_type,
        events: body.events,
        idempotencyKey: headers['idempotency-key'] as string | undefined,
        asSent: bodyText,
      });
      if (!replayed) countIngest(deps.metrics, result);
      return new Reply(202, result, replayed ? { 'Idempotent-Replayed': 'true' } : {});
    },
  }),
];
