import { z } from 'zod';
import { usageReport } from '../../../domain/limits/quotas.js';
import { PLANS } from '../../../domain/tenants/plans.js';
import { operation } from './operation.js';
import { timestamp } from './schemas.js';

const counter = z.object({
  used: z.number().int(),
  quota: z.number().int().nullable().describe('null: unlimited'),
  remaining: z.number().int().nullable(),
  overage: z.number().int().describe('usage past the quota, billed on Team and Business'),
  overQuota: z.enum(['refused', 'dropped', 'billed', 'unlimited']).describe('what happens past the quota on this plan'),
});
const usageBody = z.object({
  plan: z.enum(PLANS),
  planName: z.string(),
  periodStart: timestamp,
  resetsAt: timestamp,
  apiCalls: counter,
  mcpQueries: counter,
  ingestEvents: counter.extend({ dropped: z.number().int().describe('events refused over quota (Free)') }),
  maxVenues: z.number().int().nullable(),
  retentionDays: z.number().int(),
});

export const usageOperations = [
  operation({
    id: 'getUsage',
    method: 'get',
    path: '/api/usage',
    summary: "The current billing month's usage against the plan's quotas (not itself counted, and served over quota)",
    tag: 'Usage',
    auth: 'bearer',
    metering: { rate: 'api', quota: 'none' },
    response: { status: 200, description: 'counters, quotas and reset time', schema: usageBody },
    errors: [],
    handler: (_input, { deps, operator }) => usageReport(deps.services.db, operator),
  }),
];
