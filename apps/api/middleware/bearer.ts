import type { Context } from 'koa';
import type { RateBucket, RateLimiter } from '../../../domain/limits/rate-limit.js';
import type { Operator } from '../../../domain/tenants/operators.js';
import type { Db } from '../../../postgres/client.js';
import { bearerAuth, limitingFailures } from './auth.js';
import { countRequests, refuseKnownOverLimit } from './rate-limit.js';

export interface BearerCaller {
  operator: Operator;
  apiKey: string;
  /** Counts `requests` of the caller in the bucket (429 past its limit); a no-op without a limiter. */
  count(requests?: number): Promise<void>;
}

/**
 * The bearer-key steps REST operations and /mcp share, in order: a key already refused over
 * `bucket` this window is refused at once; the key is checked (a refusal counts against the
 * caller address's budget); the request's logger then names the operator, plus `logFields`.
 * Counting is left to the caller (`count`), which /mcp does once it knows a batch's size.
 */
export async function bearerCaller(
  db: Db,
  limiter: RateLimiter | undefined,
  ctx: Context,
  bucket: RateBucket,
  logFields: Record<string, unknown> = {},
): Promise<BearerCaller> {
  refuseKnownOverLimit(limiter, ctx, bucket);
  const { operator, apiKey } = await limitingFailures(limiter, ctx, () => bearerAuth(db, ctx));
  ctx.state.log = ctx.state.log.child({ operatorId: operator.id, ...logFields });
  return {
    operator,
    apiKey,
    count: async (requests = 1) => {
      if (limiter) await countRequests(limiter, ctx, { operatorId: operator.id, apiKey }, bucket, requests);
    },
  };
}
