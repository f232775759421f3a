import { z } from 'zod';
import { AGGREGATIONS } from '../../../clickhouse/queries/telemetry.js';
import { TELEMETRY_POINT_CAP } from '../../../domain/telemetry/buckets.js';
import { isLargeRead } from '../../../domain/limits/query-limits.js';
import { FILLS, getTelemetry } from '../../../domain/telemetry/telemetry.js';
import { MAX_TS_MS, TELEMETRY_KEYS, type TelemetryKey } from '../../../lib/events/vocabulary.js';
import { operation } from './operation.js';
import { queryInt, uuid, VENUE_ERRORS, venueParams } from './schemas.js';

const epochMs = queryInt('epoch milliseconds (an integer)', { min: 0, max: Number.MAX_SAFE_INTEGER }).pipe(
  z.number().lt(MAX_TS_MS, 'must be before 2100-01-01'),
);

const keys = z
  .string('required: comma-separated telemetry keys')
  .transform((v, ctx) => {
    const list = [
      ...new Set(
        v
          .split(',')
          .map((k) => k.trim())
          .filter(Boolean),
      ),
    ];
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
    interval: queryInt('milliseconds (an integer)', { min: 0, max: Number.MAX_SAFE_INTEGER })
      .default(3_600_000)
      .describe('bucket size in ms (default 3600000): whole minutes; whole hours read hourly, whole days venue-local daily aggregates'),
    agg: z.enum(AGGREGATIONS).default('AVG').describe('devices: distinct devices per bucket whatever the aggregation'),
    fill: z.enum(FILLS).default('none').describe('empty buckets: omitted (none), null, zero, or the previous value'),
    zoneId: uuid()
      .optional()
      .describe("an area or counter zone of the venue: that zone's occupancy history (keys=occupancy only); default the whole venue"),
  })
  .refine((q) => q.startTs < q.endTs, { path: ['endTs'], message: 'must be greater than startTs' });

/** The longest point: `{"ts":` 13 digits `,"value":` a negative 17-digit float with exponent `},`. */
const MAX_POINT_BYTES = 48;

/** Buckets a query asks for, all keys together, before the venue's calendar is known (an interval below a minute is refused later). */
const pointsAsked = (q: { keys: unknown[]; startTs: number; endTs: number; interval: number }): number =>
  q.interval <= 0 ? Infinity : q.keys.length * Math.ceil((q.endTs - q.startTs) / q.interval);

const point = z.object({ ts: z.number().int().describe('bucket start, epoch ms'), value: z.number().nullable() });

export const telemetryOperations = [
  operation({
    id: 'getTelemetry',
    method: 'get',
    path: '/api/venues/{id}/telemetry',
    summary: `Aggregated telemetry of a venue per key, over [startTs, endTs); at most ${TELEMETRY_POINT_CAP} points per key (more is a 400)`,
    tag: 'Telemetry',
    auth: 'bearer',
    cost: 'expensive',
    answerBytes: (q) => pointsAsked(q) * MAX_POINT_BYTES,
    large: (q) => isLargeRead(pointsAsked(q)),
    params: venueParams,
    query: telemetryQuery,
    response: {
      status: 200,
      description: 'Each requested key with its buckets ({ts, value}) in time order; value is null only with fill=null',
      schema: z.partialRecord(z.enum(TELEMETRY_KEYS), z.array(point)),
    },
    errors: VENUE_ERRORS,
    tool: {
      name: 'get_telemetry',
      description:
        `Time series of one venue: for each requested key (${TELEMETRY_KEYS.join(', ')}) a list of {ts, value} buckets over [startTs, endTs), ` +
        'times in epoch milliseconds (UTC). interval is the bucket size in ms (default 3600000 = 1 hour; 60000 = 1 minute; 86400000 = one venue-local day); ' +
        `agg is AVG, MAX, MIN, SUM or COUNT (devices always counts distinct devices). At most ${TELEMETRY_POINT_CAP} buckets per key. ` +
        'Units: occupancy people, temperature °C, co2 ppm, humidity %, noise dB, entries/exits people. ' +
        "zoneId (an area or counter zone's id) gives that zone's occupancy history instead of the venue's (keys=occupancy only).",
      rename: { id: 'venue_id' },
    },
    handler: ({ params, query }, { deps, operator }) =>
      getTelemetry({ db: deps.services.db, ch: deps.services.ch }, operator.id, params.id, query),
  }),
];
