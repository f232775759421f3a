import type { Queryable } from '../../postgres/client.js';
import { venueProcessorContexts, type VenueProcessorContext } from '../../postgres/queries/venues.js';

export type VenueInfo = VenueProcessorContext;

/** What a processor asks of venue contexts (`VenueInfos`; tests pass a fake without Postgres). */
export interface VenueLookup {
  resolve(venueIds: Iterable<string>, now?: number): Promise<Map<string, VenueInfo>>;
  /** The venue, reloaded first (once per `reloaded` set) when it does not list `zoneId`. */
  withZone(venueId: string, zoneId: string, known: Map<string, VenueInfo>, reloaded: Set<string>): Promise<VenueInfo | undefined>;
}

/**
 * Venue → (operator, time zone, reset hour, zones, active integrations) from Postgres, cached per
 * venue for `ttlMs` (a zone or capacity change reaches the processors within that time). A zone id
 * the cache does not know reloads its venue once (a zone created a moment ago).
 */
export class VenueInfos implements VenueLookup {
  private readonly cache = new Map<string, { info: VenueInfo; at: number }>();

  constructor(
    private readonly db: Queryable,
    private readonly ttlMs = 60_000,
  ) {}

  async resolve(venueIds: Iterable<string>, now = Date.now()): Promise<Map<string, VenueInfo>> {
    const found = new Map<string, VenueInfo>();
    const missing: string[] = [];
    for (const id of new Set(venueIds)) {
      const hit = this.cache.get(id);
      if (hit && now - hit.at < this.ttlMs) found.set(id, hit.info);
      else missing.push(id);
    }
    if (missing.length > 0) {
      for (const info of await venueProcessorContexts(this.db, missing)) {
        this.cache.set(info.id, { info, at: now });
        found.set(info.id, info);
      }
    }
    return found;
  }

  /** The venue, reloaded first (once per `reloaded` set) when it does not list `zoneId`. */
  async withZone(venueId: string, zoneId: string, known: Map<string, VenueInfo>, reloaded: Set<string>): Promise<VenueInfo | undefined> {
    const info = known.get(venueId);
    if (!info || info.zones.some((z) => z.id === zoneId) || reloaded.has(venueId)) return info;
    reloaded.add(venueId);
    this.cache.delete(venueId);
    const fresh = (await this.resolve([venueId])).get(venueId);
    if (fresh) known.set(venueId, fresh);
    return fresh;
  }
}
