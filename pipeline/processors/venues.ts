import { TtlCache } from '../../lib/ttl-cache.js';
import type { Queryable } from '../../postgres/client.js';
import { venueProcessorContexts, type VenueProcessorContext } from '../../postgres/queries/venues.js';

/** What the processors read of a venue: occupancy its settings and zones, health its integrations. */
export interface VenueInfo {
  operator_id: string;
  timezone: string;
  is_active: boolean;
  /** Venue-local hour (0–23) at which live occupancy restarts from 0. */
  occupancy_reset_hour: number;
  /** Active zones. */
  zones: Array<{ id: string; type: 'area' | 'entrance' | 'exit' | 'counter'; capacity: number | null }>;
  /** Active integrations; `created_at` ISO 8601. */
  integrations: Array<{ id: string; connector_type: string; created_at: string }>;
}

/**
 * Where the processors find venues (`VenueInfos` from Postgres; tests pass an in-memory one). An
 * answer may be as old as the implementation's cache allows: a zone or capacity change reaches
 * the processors within that time.
 */
export interface VenueLookup {
  /** The venues found among `venueIds` (a venue absent from the answer does not exist). `now`: the caller's clock, for the cache's age. */
  resolve(venueIds: Iterable<string>, now?: number): Promise<Map<string, VenueInfo>>;
  /** The venue read afresh, past any cache (a zone created a moment ago is listed). */
  refresh(venueId: string): Promise<VenueInfo | undefined>;
}

/**
 * Venue → (operator, time zone, reset hour, zones, active integrations) from Postgres, cached per
 * venue for `ttlMs`.
 */
export class VenueInfos implements VenueLookup {
  private readonly cache: TtlCache<string, VenueProcessorContext>;

  constructor(
    private readonly db: Queryable,
    ttlMs = 60_000,
  ) {
    this.cache = new TtlCache({ ttlMs });
  }

  async resolve(venueIds: Iterable<string>, now = Date.now()): Promise<Map<string, VenueInfo>> {
    const found = new Map<string, VenueInfo>();
    const missing: string[] = [];
    for (const id of new Set(venueIds)) {
      const hit = this.cache.get(id, now);
      if (hit) found.set(id, hit);
      else missing.push(id);
    }
    if (missing.length > 0) {
      for (const info of await venueProcessorContexts(this.db, missing)) {
        this.cache.set(info.id, info, now);
        found.set(info.id, info);
      }
    }
    return found;
  }

  async refresh(venueId: string): Promise<VenueInfo | undefined> {
    this.cache.delete(venueId);
    return (await this.resolve([venueId])).get(venueId);
  }
}
