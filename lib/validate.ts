import type { z } from 'zod';
import { validation, type FieldProblem } from './errors.js';

/** A UTF-16 surrogate without its pair: JSON can carry it (`"\\ud800"`), UTF-8 cannot. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export const hasLoneSurrogate = (text: string): boolean => LONE_SURROGATE.test(text);

/**
 * Text that Postgres can store as sent: text and jsonb cannot hold U+0000, and a lone surrogate
 * would otherwise become U+FFFD or a database error. Wrap every free-text schema whose value is
 * stored, so either is a 400 naming the field.
 */
export const storableText = <S extends z.ZodType<string>>(schema: S): S =>
  schema
    .refine((v) => !v.includes('\u0000'), 'must not contain the NUL character (\\u0000)')
    .refine((v) => !hasLoneSurrogate(v), 'must be well-formed Unicode: a lone surrogate (\\ud800-\\udfff without its pair) cannot be stored');

/** The path of the first string (or object key) holding a lone surrogate, e.g. `events.3.payload.name`; undefined if none. */
export function findLoneSurrogate(value: unknown, path: string[] = []): string | undefined {
  if (typeof value === 'string') return hasLoneSurrogate(value) ? path.join('.') || '(root)' : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findLoneSurrogate(value[i], [...path, String(i)]);
      if (found) return found;
    }
    return undefined;
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (hasLoneSurrogate(k)) return [...path, k].join('.');
      const found = findLoneSurrogate(v, [...path, k]);
      if (found) return found;
    }
  }
  return undefined;
}

export function fieldProblems(error: z.ZodError, prefix = ''): FieldProblem[] {
  return error.issues.map((issue) => ({
    field: [prefix, ...issue.path.map(String)].filter(Boolean).join('.') || prefix || '(root)',
    message: issue.message,
  }));
}

/** Parses input with a zod schema; a failure becomes a 400 VALIDATION_ERROR naming each bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, where: 'body' | 'query' | 'params' | 'headers' | 'arguments'): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const details = fieldProblems(result.error);
  const fields = [...new Set(details.map((d) => d.field))].join(', ');
  throw validation(`invalid ${where}: check ${fields}`, details);
}
