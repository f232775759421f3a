import { z } from 'zod';
import type { EventType, MetricName } from '../../../lib/events/vocabulary.js';
import { canonicalMac } from '../pseudonyms.js';

/**
 * Building blocks for the connectors' accepted event types. A connector file lists, per event
 * type, its payload fields (under the vendor's names) and an example; these helpers add what every
 * type shares (zone reference, metrics, device and pseudonymised fields) so each type is one line
 * of intent, not a copy of the same parsing code.
 */

export type Metrics = Partial<Record<MetricName, number>>;

export type ZoneRef = { id: string } | { slug: string };

/** What one validated payload normalises to. Raw identifiers in it live only until ingest replaces them. */
export interface Normalised {
  /** The payload field naming the device: a canonical MAC, or a vendor's already-hashed MAC. */
  device?: { field: string; mac: string } | { field: string; hashed: string };
  zone?: ZoneRef;
  metrics: Metrics;
  /** The documented vendor fields only (unknown ones are dropped), zone reference removed. */
  payload: Record<string, unknown>;
  /** Other payload fields holding personal identifiers, replaced by keyed pseudonyms at ingest. */
  pseudonymise?: string[];
  /** The vendor's own event id: an event re-delivered with it keeps the same canonical id. */
  vendorId?: string;
}

export interface EventSpec {
  /** Validates one event's payload and normalises it. */
  payload: z.ZodType<Normalised>;
  /** A payload this type accepts, shown in docs/events.md and sent by the tests. */
  example: Record<string, unknown>;
}

/** A connector's closed list of accepted event types. */
export type ConnectorEvents = Partial<Record<EventType, EventSpec>>;

// ---- field types shared by several connectors ------------------------------------------------

/** A MAC in any usual spelling, normalised to `aa:bb:cc:dd:ee:ff`. Never echoed in a reason. */
const mac = z.string().transform((value, ctx) => {
  const canonical = canonicalMac(value);
  if (canonical) return canonical;
  ctx.addIssue({ code: 'custom', message: 'not a MAC address (12 hex digits, e.g. aa:bb:cc:dd:ee:ff)' });
  return z.NEVER;
});

export const id = z.string().trim().min(1).max(128);
export const label = z.string().max(256);
/** Vendor-side epoch seconds (first_seen, seenEpoch …): kept as information; the event time is `timestamp`. */
export const epochSeconds = z.number().int().nonnegative();

const zoneFields = {
  zone_id: z.uuid('must be a zone uuid').optional(),
  zone: z.string().min(1).max(64).optional(),
};

// ---- event type builders ------------------------------------------------------------------------

type Fields = z.ZodRawShape;
type Parsed<S extends Fields> = z.output<z.ZodObject<S>>;
type Meaning = Omit<Normalised, 'zone' | 'payload'>;

/**
 * One accepted event type: `fields` (vendor names), what a parsed payload means, and an example.
 * Every type also takes an optional `zone_id` (uuid) or `zone` (slug) naming one of the venue's zones.
 */
export function eventType<S extends Fields>(
  fields: S,
  meaning: (p: Parsed<S>) => Meaning,
  example: Record<string, unknown>,
  rule?: { check: (p: Parsed<S>) => boolean; message: string; path?: string },
): EventSpec {
  const object = z.object({ ...fields, ...zoneFields });
  const checked = rule
    ? object.refine((p) => rule.check(p as Parsed<S>), { message: rule.message, path: rule.path ? [rule.path] : [] })
    : object;
  const payload = checked
    .refine((p) => !((p as Record<string, unknown>).zone_id && (p as Record<string, unknown>).zone), {
      message: 'give zone_id or zone, not both',
      path: ['zone'],
    })
    .transform((p): Normalised => {
      // zod's output is this parse's own object (only the declared keys it was given), so the zone
      // reference is taken out of it in place: an object rest copy per event would cost more than its checks.
      const payload = p as Record<string, unknown>;
      const { zone_id, zone } = payload;
      if (zone_id !== undefined) delete payload.zone_id;
      if (zone !== undefined) delete payload.zone;
      const normalised = meaning(payload as Parsed<S>) as Normalised;
      normalised.zone = typeof zone_id === 'string' ? { id: zone_id } : typeof zone === 'string' ? { slug: zone } : undefined;
      normalised.payload = payload;
      return normalised;
    });
  return { payload, example };
}

const field = (p: object, name: string | undefined) => (name ? (p as Record<string, unknown>)[name] : undefined);

/**
 * `device_seen` / `device_left`: the device's MAC under the vendor's field name, or (Aruba's
 * anonymised feed) a vendor hash of it instead; either becomes the event's device pseudonym.
 */
export function device(names: { mac: string; hashed?: string }, fields: Fields, example: Record<string, unknown>): EventSpec {
  const { mac: macField, hashed: hashedField } = names;
  const sha1 = z
    .string()
    .regex(/^[0-9a-fA-F]{40}$/, 'must be 40 hex digits')
    .transform((h) => h.toLowerCase());
  const shape = { ...fields, [macField]: hashedField ? mac.optional() : mac, ...(hashedField ? { [hashedField]: sha1.optional() } : {}) };
  return eventType(
    shape,
    (p) => {
      const raw = field(p, macField) as string | undefined;
      return {
        metrics: {},
        device: raw ? { field: macField, mac: raw } : { field: hashedField!, hashed: field(p, hashedField) as string },
      };
    },
    example,
    hashedField
      ? {
          check: (p) => (field(p, macField) === undefined) !== (field(p, hashedField) === undefined),
          message: `give exactly one of ${macField} or ${hashedField}`,
          path: macField,
        }
      : undefined,
  );
}

/** `entry` / `exit`: `count` people crossed (default 1). */
export function crossing(metric: 'entries' | 'exits', fields: Fields, example: Record<string, unknown>): EventSpec {
  return eventType(
    { ...fields, count: z.int().min(1).max(100_000).default(1) },
    (p) => ({ metrics: { [metric]: p.count as number } }),
    example,
  );
}

/** `occupancy`: people present now, as counted by the vendor. */
export function occupancy(fields: Fields, example: Record<string, unknown>): EventSpec {
  return eventType(
    { ...fields, occupancy: z.number().min(0).max(1_000_000) },
    (p) => ({ metrics: { occupancy: p.occupancy as number } }),
    example,
  );
}

const readings = {
  /** °C */
  temperature: z.number().min(-100).max(150).optional(),
  /** ppm */
  co2: z.number().min(0).max(100_000).optional(),
  /** % relative humidity */
  humidity: z.number().min(0).max(100).optional(),
  /** dB(A) */
  noise: z.number().min(0).max(200).optional(),
};
const READINGS = Object.keys(readings) as Array<keyof typeof readings>;

/** `environment`: at least one of temperature, co2, humidity, noise; each becomes a metric. */
export function environment(fields: Fields, example: Record<string, unknown>): EventSpec {
  const present = (p: object) => READINGS.filter((k) => field(p, k) !== undefined);
  return eventType(
    { ...fields, ...readings },
    (p) => ({ metrics: Object.fromEntries(present(p).map((k) => [k, field(p, k) as number])) }),
    example,
    { check: (p) => present(p).length > 0, message: `give at least one reading: ${READINGS.join(', ')}` },
  );
}

/** `heartbeat`: the connector is alive; the same for every connector. */
export const heartbeat = (example: Record<string, unknown> = { status: 'ok', version: '1.4.2' }): EventSpec =>
  eventType(
    {
      status: z.enum(['ok', 'degraded', 'error']).default('ok'),
      version: z.string().max(64).optional(),
      message: z.string().max(500).optional(),
      integration_id: z.uuid().optional(),
    },
    () => ({ metrics: {} }),
    example,
  );
