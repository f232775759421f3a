import type { z } from 'zod';
import { validation, type FieldProblem } from './errors.js';

/**
 * Postgres text and jsonb cannot hold U+0000. Wrap every free-text schema whose value is stored, so
 * the character is a 400 naming the field rather than a database error.
 */
export const nulFree = <S extends z.ZodType<string>>(schema: S): S =>
  schema.refine((v) => !v.includes('\u0000'), 'must not contain the NUL character (\\u0000)');

export function fieldProblems(error: z.ZodError, prefix = ''): FieldProblem[] {
  return error.issues.map((issue) => ({
    field: [prefix, ...issue.path.map(String)].filter(Boolean).join('.') || prefix || '(root)',
    message: issue.message,
  }));
}

/** Parses input with a zod schema; a failure becomes a 400 VALIDATION_ERROR naming each bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, where: 'body' | 'query' | 'params' | 'arguments'): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const details = fieldProblems(result.error);
  const fields = [...new Set(details.map((d) => d.field))].join(', ');
  throw validation(`invalid ${where}: check ${fields}`, details);
}
