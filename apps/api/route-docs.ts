import type { z } from 'zod';

/**
 * What a route module tells the OpenAPI generator about each of its routes. Every file in
 * routes/ exports `docs: RouteDoc[]` built from the same zod schemas it parses input with.
 */
export interface RouteDoc {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI path syntax, e.g. `/api/venues/{id}`. */
  path: string;
  summary: string;
  tag: string;
  auth: 'bearer' | 'admin' | 'public';
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodType;
  /** Success responses by status. */
  responses: Record<number, { description: string; schema?: z.ZodType }>;
  /** Error statuses this route can answer, each rendered with the error envelope. */
  errors: number[];
}
