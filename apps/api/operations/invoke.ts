import { scopedSettings } from '../../../clickhouse/client.js';
import { LARGE_READ_SETTINGS, queryLimitError } from '../../../domain/limits/query-limits.js';
import { JsonStream } from '../../../lib/json-stream.js';
import { Reply, type AnyOperation, type BearerContext, type OperationContext } from './operation.js';

export interface OperationInput {
  params: unknown;
  query: unknown;
  body: unknown;
  headers: Record<string, unknown>;
  /** The body's text as received, on REST only. */
  bodyText?: string;
}

/**
 * Calls an operation's handler for any transport: an expensive read first waits for its turn in the
 * query gate (a large read for all its operator's turns, at ClickHouse's lower priority on one
 * thread), and holds its turn until its answer is produced (a streamed answer: until read to the
 * end or abandoned); a read stopped by a ClickHouse limit becomes the error the client can act on.
 * `signal` withdraws a read still waiting when the client goes away.
 */
export async function invoke(
  op: AnyOperation,
  input: OperationInput,
  ctx: OperationContext | BearerContext,
  signal?: AbortSignal,
): Promise<unknown> {
  if (op.cost !== 'expensive' || !('operator' in ctx)) return op.handler(input as never, ctx as BearerContext);
  const large = op.large?.(input.query) ?? false;
  // A large read takes all of its operator's turns: one at a time, beside nothing else of theirs.
  const release = await ctx.deps.queryGate.acquire(ctx.operator.id, signal, large ? Infinity : 1);
  let result: unknown;
  try {
    const run = () => op.handler(input as never, ctx);
    result = await (large ? scopedSettings.run(LARGE_READ_SETTINGS, run) : run());
  } catch (err) {
    release();
    throw queryLimitError(err);
  }
  const body = result instanceof Reply ? (result.body as unknown) : result;
  if (body instanceof JsonStream && !body.stream.destroyed) body.stream.once('close', release);
  else release();
  return result;
}
