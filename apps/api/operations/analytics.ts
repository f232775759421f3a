import { z } from 'zod';
import { connectorHealth, connectorHealthOutput } from '../../../domain/analytics/connectors.js';
import { DWELL_RANGES, dwellOutput, venueDwell } from '../../../domain/analytics/dwell.js';
import { venueOccupancy, venueOccupancyOutput } from '../../../domain/analytics/occupancy.js';
import { predictionOutput, predictOccupancy, predictOccupancyWeek, weekPredictionOutput } from '../../../domain/analytics/predictions.js';
import { SCORING_RANGES, scoringOutput, visitorScoring } from '../../../domain/analytics/scoring.js';
import { LONG_RANGES } from '../../../domain/limits/query-limits.js';
import { operation } from './operation.js';
import { queryInt, VENUE_ERRORS, venueParams } from './schemas.js';

const rangeOf = <R extends Record<string, number>>(ranges: R) => Object.keys(ranges) as [keyof R & string, ...Array<keyof R & string>];

const dwellQuery = z.object({
  range: z.enum(rangeOf(DWELL_RANGES)).default('7d').describe('visits started in the last 24h, 7d (default), 30d or 90d'),
});
const scoringQuery = z.object({
  range: z.enum(rangeOf(SCORING_RANGES)).default('30d').describe('distinct visit days in the last 7d, 30d (default) or 90d'),
});
const predictionQuery = z.object({
  dayOfWeek: queryInt('an integer from 0 (Sunday) to 6 (Saturday)', { min: 0, max: 6 }).describe(
    'required: 0 (Sunday) to 6 (Saturday), venue-local',
  ),
  hour: queryInt('an integer from 0 to 23', { min: 0, max: 23 }).describe('required: 0 to 23, venue-local'),
});

/** Read side of the stream processors (docs/processors.md). */
export const analyticsOperations = [
  operation({
    id: 'getOccupancy',
    method: 'get',
    path: '/api/venues/{id}/occupancy',
    summary: 'Live occupancy of the venue and of each active zone, with capacity and percent where set (our addition to the spec)',
    tag: 'Analytics',
    auth: 'bearer',
    params: venueParams,
    response: { status: 200, description: 'The current figures and when each last changed', schema: venueOccupancyOutput },
    errors: VENUE_ERRORS,
    tool: {
      name: 'get_occupancy',
      description:
        'Current occupancy of one venue: people present in the whole venue and in each active zone (entrance and exit zones count for the venue, so their own figure is null), ' +
        "each zone's capacity in people and percent of capacity where a capacity is set, and the time (ISO 8601, UTC) each figure last changed. Live: derived from entry/exit and count events as they arrive.",
      rename: { id: 'venue_id' },
    },
    handler: ({ params }, { deps, operator }) => venueOccupancy(deps.services, operator.id, { id: params.id }),
  }),
  operation({
    id: 'getDwell',
    method: 'get',
    path: '/api/venues/{id}/dwell',
    summary: 'Dwell-time histogram of visits (0-5m, 5-15m, 15-30m, 30-60m, 60m+) for the whole venue and each active zone',
    tag: 'Analytics',
    auth: 'bearer',
    cost: 'expensive',
    large: (q) => LONG_RANGES.has(q.range),
    params: venueParams,
    query: dwellQuery,
    response: {
      status: 200,
      description: 'The whole venue first (zone_id "default", "Entire Venue"), then each active zone',
      schema: dwellOutput,
    },
    errors: VENUE_ERRORS,
    tool: {
      name: 'get_dwell',
      description:
        'How long visitors stay at one venue: counts of visits by dwell time in buckets 0-5m, 5-15m, 15-30m, 30-60m and 60m+, for the whole venue (zone_id "default") and each zone, ' +
        "over ended visits that started in the last 24h, 7d (default), 30d or 90d. A visit ends after 15 minutes without a sighting of the device, at a departure, or at the venue's daily reset.",
      rename: { id: 'venue_id' },
    },
    handler: ({ params, query }, { deps, operator }) => venueDwell(deps.services, operator.id, { id: params.id, range: query.range }),
  }),
  operation({
    id: 'getVisitorScoring',
    method: 'get',
    path: '/api/venues/{id}/visitors/scoring',
    summary: 'Visitor loyalty: unique devices by distinct visit days in the range (New 1, Returning 2-3, Regular 4-7, Loyal 8+)',
    tag: 'Analytics',
    auth: 'bearer',
    cost: 'expensive',
    large: (q) => LONG_RANGES.has(q.range),
    params: venueParams,
    query: scoringQuery,
    response: {
      status: 200,
      description: 'All four segments in order; percentages sum to 100 (all 0 without visitors)',
      schema: scoringOutput,
    },
    errors: VENUE_ERRORS,
    tool: {
      name: 'get_visitor_scoring',
      description:
        "Loyalty of one venue's visitors: unique devices segmented by the number of distinct visit days (the venue's days between daily resets, today's included) in the last 7d, 30d (default) or 90d: " +
        'New (1 day), Returning (2-3), Regular (4-7), Loyal (8 or more), each with a count and a percentage of the total.',
      rename: { id: 'venue_id' },
    },
    handler: ({ params, query }, { deps, operator }) => visitorScoring(deps.services, operator.id, { id: params.id, range: query.range }),
  }),
  operation({
    id: 'predictOccupancy',
    method: 'get',
    path: '/api/venues/{id}/predictions/occupancy',
    summary: 'Expected venue occupancy at a local day of week and hour, from the last 28 days of hourly occupancy',
    tag: 'Analytics',
    auth: 'bearer',
    cost: 'expensive',
    params: venueParams,
    query: predictionQuery,
    response: {
      status: 200,
      description: 'mean and percentiles of the samples; sampleSize 0 with zeros without history',
      schema: predictionOutput,
    },
    errors: VENUE_ERRORS,
    tool: {
      name: 'predict_occupancy',
      description:
        "Expected whole-venue occupancy (people) at a day of week (0 Sunday to 6 Saturday) and hour (0-23), both in the venue's local time zone: " +
        'mean, p25, p75 and p95 over that weekday-and-hour in the last 28 days, and the number of hourly samples used.',
      rename: { id: 'venue_id' },
    },
    handler: ({ params, query }, { deps, operator }) =>
      predictOccupancy(deps.services, operator.id, { id: params.id, dayOfWeek: query.dayOfWeek, hour: query.hour }),
  }),
  operation({
    id: 'predictOccupancyWeek',
    method: 'get',
    path: '/api/venues/{id}/predictions/occupancy/week',
    summary:
      'Expected venue occupancy for every local day of week and hour (168 cells), from the last 28 days of hourly occupancy, in one read',
    tag: 'Analytics',
    auth: 'bearer',
    cost: 'expensive',
    params: venueParams,
    response: {
      status: 200,
      description: 'Sunday 0:00 first, then by hour; each cell as the single-hour prediction answers it',
      schema: weekPredictionOutput,
    },
    errors: VENUE_ERRORS,
    tool: {
      name: 'predict_occupancy_week',
      description:
        "Expected whole-venue occupancy (people) for all 168 hours of a week, in the venue's local time zone (returned as timezone): per day of week (0 Sunday to 6 Saturday) " +
        'and hour (0-23) the mean, p25, p75 and p95 over that weekday-and-hour in the last 28 days and the number of hourly samples. Use it to find busy and quiet hours.',
      rename: { id: 'venue_id' },
    },
    handler: ({ params }, { deps, operator }) => predictOccupancyWeek(deps.services, operator.id, { id: params.id }),
  }),
  operation({
    id: 'getConnectorHealth',
    method: 'get',
    path: '/api/dashboard/connectors',
    summary: "The operator's active integrations grouped by connector type and health (healthy, degraded, offline)",
    tag: 'Dashboard',
    auth: 'bearer',
    response: {
      status: 200,
      description: 'One group per (type, status) with its count and newest sign of life',
      schema: connectorHealthOutput,
    },
    errors: [401, 429],
    tool: {
      name: 'get_connector_health',
      description:
        "Health of the caller's hardware connectors: active integrations grouped by connector type (meraki, aruba, unifi, mywifi, square, density, verkada) and status " +
        '(healthy; degraded after 3 missed reporting intervals or 5 % rejected events; offline after 10 missed intervals), with the count and the latest event or heartbeat time (ISO 8601, UTC).',
    },
    handler: (_input, { deps, operator }) => connectorHealth(deps.services, operator.id),
  }),
];
