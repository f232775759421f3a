import { z } from 'zod';
import { integerInQuery } from '../../../lib/json-schema.js';

/** Schemas shared by several operations: ids, timestamps, paging, integers in a query string. */

export const uuid = (what = 'must be a UUID') => z.uuid(what);

/** Path ids are checked before any lookup, so a malformed id is a 400 rather than a failed uuid cast. */
export const venueParams = z.object({ id: uuid() });
export const zoneParams = venueParams.extend({ zoneId: uuid() });
export const integrationParams = venueParams.extend({ integrationId: uuid() });

export const timestamp = z.iso.datetime();

/**
 * One rule for every integer in a query string: plain decimal digits only (no sign, blank, space,
 * exponent, hex or fraction), at most 16 of them, then the bounds. `limit=1e2` or `offset=` is a
 * 400 naming the parameter, never a silent coercion.
 */
export function queryInt(what: string, bounds: { min: number; max: number }) {
  return z
    .string(`must be ${what}`)
    .regex(/^\d{1,16}$/, `must be ${what} written in plain digits`)
    .transform(Number)
    .pipe(z.number().min(bounds.min, `must be at least ${bounds.min}`).max(bounds.max, `must be at most ${bounds.max}`))
    .register(integerInQuery, { minimum: bounds.min, maximum: bounds.max });
}

/** The spec's list paging: `limit` default 50, at most 200 (more is a 400, not clamped); `offset` default 0. */
export const MAX_PAGE_SIZE = 200;
export const MAX_OFFSET = 1_000_000;
export const pageQuery = z.object({
  limit: queryInt('an integer', { min: 1, max: MAX_PAGE_SIZE }).default(50).describe(`page size, 1 to ${MAX_PAGE_SIZE} (default 50)`),
  offset: queryInt('an integer', { min: 0, max: MAX_OFFSET }).default(0).describe(`rows to skip, 0 to ${MAX_OFFSET} (default 0)`),
});

/** A field the server owns: present in a body it is a 400 naming it, not silently dropped. */
export const readOnly = (message = 'read-only field') => z.never({ error: message }).optional().describe(`not accepted: ${message}`);

/** The fields every created resource owns; a body carrying one is a 400. */
export const serverOwned = (extra: Record<string, string> = {}) => ({
  id: readOnly(),
  is_active: readOnly(),
  created_at: readOnly(),
  updated_at: readOnly(),
  deleted_at: readOnly(),
  ...Object.fromEntries(Object.entries(extra).map(([field, message]) => [field, readOnly(message)])),
});

export const deletedResponse = z.object({ id: z.uuid(), is_active: z.literal(false), deleted_at: timestamp });

export const count = z.number().int();

/** Errors of an operation on one venue (or something inside it): bad id, no key, not theirs, gone, limited. */
export const VENUE_ERRORS = [400, 401, 403, 404, 429] as const;
