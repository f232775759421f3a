import { z } from 'zod';
import { AppError, type FieldProblem } from '../../../lib/errors.js';
import { JsonStream } from '../../../lib/json-stream.js';
import { parseInput } from '../../../lib/validate.js';
import { invoke } from '../operations/invoke.js';
import { Reply, type AnyOperation, type BearerContext } from '../operations/operation.js';

/**
 * MCP tools generated from the operations marked `tool`: the same schemas, the same domain call,
 * the same errors as the REST route. The tool's arguments are the operation's path and query
 * parameters (renamed as the declaration says, e.g. `id` → `venue_id`); numbers and booleans an
 * agent sends are read as the query string would carry them.
 */
export interface GeneratedTool {
  name: string;
  description: string;
  inputSchema: z.ZodObject;
  outputSchema?: z.ZodType;
  annotations: { title: string; readOnlyHint: true; idempotentHint: true; openWorldHint: false };
  /**
   * Validates the arguments (400 VALIDATION_ERROR naming each bad argument), calls the domain and
   * answers the result as JSON text, refused (400) when longer than the configured MCP result cap.
   */
  call(args: Record<string, unknown>, ctx: BearerContext, budget?: ResultBudget): Promise<string>;
}

const asQueryValue = (v: unknown) => (typeof v === 'number' || typeof v === 'boolean' ? String(v) : v);

export function toolsFrom(operations: readonly AnyOperation[]): GeneratedTool[] {
  return operations.flatMap((op) => {
    if (!op.tool) return [];
    if (op.auth !== 'bearer' || op.method !== 'get') throw new Error(`${op.id}: only authenticated reads can be MCP tools`);
    const rename = op.tool.rename ?? {};
    const argName = (field: string) => rename[field] ?? field;
    const shape: Record<string, z.ZodType> = {};
    const sources: Array<['params' | 'query', z.ZodObject | undefined]> = [
      ['params', op.params],
      ['query', op.query],
    ];
    for (const [where, schema] of sources) {
      for (const [field, fieldSchema] of Object.entries(schema?.shape ?? {})) {
        shape[argName(field)] = where === 'query' ? z.preprocess(asQueryValue, fieldSchema as z.ZodType) : (fieldSchema as z.ZodType);
      }
    }
    const pick = (schema: z.ZodObject | undefined, args: Record<string, unknown>) =>
      Object.fromEntries(Object.keys(schema?.shape ?? {}).map((field) => [field, asQueryValue(args[argName(field)])]));
    return [
      {
        name: op.tool.name,
        description: op.tool.description,
        inputSchema: z.object(shape),
        outputSchema: op.response.schema,
        annotations: { title: op.summary, readOnlyHint: true, idempotentHint: true, openWorldHint: false },
        async call(
          args: Record<string, unknown>,
          ctx: BearerContext,
          budget = new ResultBudget(ctx.deps.services.cfg.MCP_MAX_RESULT_BYTES),
        ) {
          let input;
          try {
            input = {
              params: op.params ? parseInput(op.params, pick(op.params, args), 'arguments') : undefined,
              query: op.query ? parseInput(op.query, pick(op.query, args), 'arguments') : undefined,
              body: undefined,
              headers: {},
            };
          } catch (err) {
            throw withArgumentNames(err, argName);
          }
          // What the arguments say the answer can take is set aside first, so the calls of a batch
          // cannot all start reads that only one of them may answer.
          const estimate = op.answerBytes?.(input.query) ?? 0;
          const room = budget.left;
          if (estimate > room) throw budget.tooLarge('can be', room);
          budget.left -= estimate;
          let used = 0;
          try {
            const result = await invoke(op, input, ctx);
            const body = result instanceof Reply ? result.body : result;
            const mayUse = budget.left + estimate;
            const text = body instanceof JsonStream ? await body.textUpTo(mayUse) : JSON.stringify(body);
            if (text === undefined || Buffer.byteLength(text) > mayUse) throw budget.tooLarge('is', mayUse);
            used = Buffer.byteLength(text);
            return text;
          } finally {
            budget.left += estimate - used;
          }
        },
      },
    ];
  });
}

/**
 * The bytes of JSON the tool results of one MCP request may take together (a batch shares them),
 * so neither one answer nor a batch of them can make the api build an answer of many megabytes.
 */
export class ResultBudget {
  left: number;
  constructor(readonly cap: number) {
    this.left = cap;
  }

  /** An answer an agent cannot use whole: the same 400 as a range over the point cap, saying how to narrow it. */
  tooLarge(verb: 'is' | 'can be', room: number): AppError {
    const message =
      room >= this.cap
        ? `the answer ${verb} larger than ${this.cap} bytes, the most a tool result carries; ask for a shorter time range, fewer keys or a coarser interval`
        : `the answer ${verb} larger than the ${room} bytes left of the ${this.cap} that the tool results of one request share; send fewer calls per batch, or ask for shorter ranges, fewer keys or coarser intervals`;
    return new AppError(400, 'VALIDATION_ERROR', message, [{ field: 'arguments', message }]);
  }
}

/** A validation error names the tool's arguments (`venue_id`), not the route's parameters (`id`). */
function withArgumentNames(err: unknown, argName: (field: string) => string): unknown {
  if (!(err instanceof AppError) || err.code !== 'VALIDATION_ERROR' || !Array.isArray(err.details)) return err;
  const details = (err.details as FieldProblem[]).map((d) => {
    const [first = '', ...rest] = d.field.split('.');
    return { ...d, field: [argName(first), ...rest].join('.') };
  });
  return new AppError(400, 'VALIDATION_ERROR', `invalid arguments: check ${[...new Set(details.map((d) => d.field))].join(', ')}`, details);
}
