import type { Queryable } from '../../postgres/client.js';
import { venueSinkContexts } from '../../postgres/queries/venues.js';
import { PLAN_LIMITS } from '../../domain/tenants/plans.js';
import { TtlCache } from '../../lib/ttl-cache.js';
import type { Placement } from './rows.js';

export interface VenueContext extends Placement {
  operatorId: string;
}

/**
 * Venue → (operator, time zone, retention class), read from Postgres once per venue per `ttlMs`:
 * a plan or time-zone change reaches new events within that time. Unknown venues are not cached.
 */
export class VenueContexts {
  private readonly cache: TtlCache<string, VenueContext>;

  constructor(
    private readonly db: Queryable,
    ttlMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {
    this.cache = new TtlCache({ ttlMs, now });
  }

  async resolve(venueIds: Iterable<string>): Promise<Map<string, VenueContext>> {
    const now = this.now();
    const found = new Map<string, VenueContext>();
    const missing: string[] = [];
    for (const id of new Set(venueIds)) {
      const hit = this.cache.get(id, now);
      if (hit) found.set(id, hit);
      else missing.push(id);
    }
    // One query for the whole batch's missing venues, rather than a load per venue.
    if (missing.length > 0) {
      for (const v of await venueSinkContexts(this.db, missing)) {
        const ctx = { operatorId: v.operator_id, timezone: v.timezone, retentionDays: PLAN_LIMITS[v.plan].retentionDays };
        this.cache.set(v.id, ctx, now);
        found.set(v.id, ctx);
      }
    }
    return found;
  }
}
