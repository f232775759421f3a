import type Router from '@koa/router';
import { z } from 'zod';
import { AGGREGATIONS } from '../../../clickhouse/queries/telemetry.js';
import { TELEMETRY_POINT_CAP } from '../../../domain/telemetry/buckets.js';
import { FILLS, getTelemetry } from '../../../domain/telemetry/telemetry.js';
import { MAX_TS_MS, TELEMETRY_KEYS, type TelemetryKey } from '../../../lib/events.js';
import { parseInput } from '../../../lib/validate.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';
import { authedRouter } from './authed.js';

const telemetryParams = z.object({ id: z.uuid('must be a UUID') });

/** A non-negative integer written in digits (no '', no 1e3, no 1.5). */
const digits = (what: string) => z.string(`required: ${what}`).regex(/^\d{1,16}$/, `must be ${what}`).transform(Number);

const epochMs = digits('epoch milliseconds (an integer)').pipe(z.number().max(MAX_TS_MS, 'must be before 2100-01-01'));

const keys = z
  .string('required: comma-separated telemetry keys')
  .transform((v, ctx) => {
    const list = [...new Set(v.split(',').map((k) => k.trim()).filter(Boolean))];
    if (list.length === 0) ctx.addIssue({ code: 'custom', message: `at least one of ${TELEMETRY_KEYS.join(', ')}` });
    for (const k of list) {
      if (!(TELEMETRY_KEYS as readonly string[]).includes(k)) {
        ctx.addIssue({ code: 'custom', message: `unknown telemetry key '${k.slice(0, 64)}' (known: ${TELEMETRY_KEYS.join(', ')})` });
      }
    }
    return list as TelemetryKey[];
  })
  .describe(`comma-separated: ${TELEMETRY_KEYS.join(', ')}`);

const telemetryQuery = z
  .object({
    keys,
    startTs: epochMs.describe('range start, epoch ms, inclusive'),
    endTs: epochMs.describe('range end, epoch ms, exclusive'),
    interval: digits('milliseconds (an integer)')
      .default(3_600_000)
      .describe('bucket size in ms (default 3600000): whole minutes; whole hours read hourly, whole days venue-local daily aggregates'),
    agg: z.enum(AGGREGATIONS).default('AVG').describe('devices: distinct devices per bucket whatever the aggregation'),
    fill: z.enum(FILLS).default('none').describe('empty buckets: omitted (none), null, zero, or the previous value'),
  })
  .refine((q) => q.startTs < q.endTs, { path: ['endTs'], message: 'must be greater than startTs' });

const point = z.object({ ts: z.number().int().describe('bucket start, epoch ms'), value: z.number().nullable() });

export function telemetryRoutes(deps: ApiDeps): Router {
  const { db, ch } = deps.services;
  const router = authedRouter(deps);
  router.get('/api/venues/:id/telemetry', async (ctx) => {
    const { id } = parseInput(telemetryParams, ctx.params, 'params');
    const query = parseInput(telemetryQuery, ctx.query, 'query');
    ctx.body = await getTelemetry({ db, ch }, ctx.state.operator.id, id, query);
  });
  return router;
}

export const docs: RouteDoc[] = [
  {
    method: 'get',
    path: '/api/venues/{id}/telemetry',
    summary: `Aggregated telemetry of a venue per key, over [startTs, endTs); at most ${TELEMETRY_POINT_CAP} points per key (more is a 400)`,
    tag: 'Telemetry',
    auth: 'bearer',
    params: telemetryParams,
    query: telemetryQuery,
    responses: {
      200: {
        description: 'Each requested key with its buckets ({ts, value}) in time order; value is null only with fill=null',
        schema: z.partialRecord(z.enum(TELEMETRY_KEYS), z.array(point)),
      },
    },
    errors: [400, 401, 403, 404, 429],
  },
];
