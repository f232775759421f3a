import { z } from 'zod';

export type JsonSchema = Record<string, unknown>;

/**
 * Query-string integers (digits in the URL, a number to the handler) carry their bounds here, so
 * the published schemas say `integer` with those bounds instead of the string pattern they parse.
 */
export const integerInQuery = z.registry<{ minimum: number; maximum: number }>();

/**
 * JSON Schema 2020-12 of a zod schema, as OpenAPI 3.1 and MCP tool lists publish it: without
 * `$schema` (implied by the document), integers in query strings as integers, and a nullable type
 * as `anyOf` branches rather than a type list (`type: ["number", "null"]`), which some MCP clients
 * and code generators cannot read.
 */
export function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
    override: ({ zodSchema, jsonSchema: out }) => {
      const bounds = integerInQuery.get(zodSchema as unknown as z.ZodType);
      if (!bounds) return;
      delete out.pattern;
      Object.assign(out, { type: 'integer', ...bounds });
    },
  }) as JsonSchema;
  return nullableAsAnyOf(rest) as JsonSchema;
}

function nullableAsAnyOf(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(nullableAsAnyOf);
  if (node === null || typeof node !== 'object') return node;
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(node)) out[k] = nullableAsAnyOf(v);
  const type = out.type;
  if (!Array.isArray(type) || !type.includes('null')) return out;
  const { type: _, ...rest } = out;
  const others = type.filter((t) => t !== 'null');
  const first = others.length === 1 ? { ...rest, type: others[0] } : { ...rest, type: others };
  return { anyOf: [first, { type: 'null' }] };
}
