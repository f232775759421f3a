import { z } from 'zod';

/**
 * A query-string integer: plain digits only (no sign, exponent, hex or blanks), within bounds.
 * Accepts a number too, for callers (MCP tools) that pass typed arguments.
 */
export const queryInt = (min: number, max: number) =>
  z
    .union(
      [
        z.number(),
        z
          .string()
          .regex(/^\d{1,6}$/)
          .transform(Number),
      ],
      {
        error: (issue) => (issue.input === undefined ? 'is required' : 'must be a whole number written as digits'),
      },
    )
    .pipe(z.number().int('must be a whole number').min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));
