import type { Context, Next } from 'koa';
import type { Db } from '../../../postgres/client.js';
import { countUsage } from '../../../domain/limits/quotas.js';

/**
 * Not counted as API calls: ingest is metered per event and MCP per query; the usage and key
 * endpoints stay free so an operator over quota can still see why and secure its account.
 */
const UNMETERED = [/^\/ingest\/?$/i, /^\/mcp(\/|$)/i, /^\/api\/usage\/?$/i, /^\/api\/keys(\/|$)/i];

/** Counts every other authenticated request against the monthly API-call quota (one upsert). */
export function meterApiCalls(db: Db) {
  return async (ctx: Context, next: Next): Promise<void> => {
    if (!UNMETERED.some((re) => re.test(ctx.path))) await countUsage(db, ctx.state.operator, 'api_calls');
    await next();
  };
}
