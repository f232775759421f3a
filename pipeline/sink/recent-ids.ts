import { MAX_FUTURE_MS } from '../../domain/ingest/timestamps.js';
import { Uint32Set } from '../../lib/uint32-set.js';

const MINUTE_MS = 60_000;

export interface RecentIdsOptions {
  /** Event times older than this behind the clock are looked up in ClickHouse (default 5 minutes). */
  windowMs?: number;
  /**
   * How long after the sink became a partition's only writer its memory starts to answer: an event
   * another writer stored was accepted before then, so its event time is at most the ingest's
   * accepted future skew (5 minutes) plus the clocks' difference (1 minute) past it.
   */
  trustAfterMs?: number;
  /** At most this many ids in memory (about 8–16 bytes each); the oldest minutes go first. */
  maxIds?: number;
}

/**
 * The first 32 bits of a derived (HMAC) UUID: as random as any hash of it, never 0. A hash shared
 * by two ids only sends the second to the ClickHouse look-up, so 32 bits are enough.
 */
const hashOf = (id: string): number => parseInt(id.slice(0, 8), 16) || 1;

/**
 * The derived ids the sink stored per partition in the last minutes of event time, so that live
 * traffic is not looked up in ClickHouse one candidate at a time (docs/pipeline.md#vendor-re-deliveries).
 *
 * A venue's events all go to one partition. From the moment a sink has looked up what others
 * stored in a partition (`own`), it is that partition's only writer, so an event whose time is past
 * that moment plus `trustAfterMs` can only repeat an id this sink stored itself, and memory answers
 * "not stored" for it. A hit, an older event or a partition not owned goes to ClickHouse as before.
 */
export class RecentIds {
  private readonly windowMs: number;
  private readonly trustAfterMs: number;
  private readonly maxIds: number;
  /** Per owned partition: since when this sink is its only writer. */
  private readonly since = new Map<number, number>();
  /** Event-time minute → partition → hashes. */
  private readonly minutes = new Map<number, Map<number, Uint32Set>>();
  /** Memory is complete only for event times from here on (never moves back, even if the clock does). */
  private windowStart = 0;
  private size = 0;

  constructor(
    opts: RecentIdsOptions = {},
    private readonly now: () => number = Date.now,
  ) {
    this.windowMs = opts.windowMs ?? 5 * MINUTE_MS;
    this.trustAfterMs = opts.trustAfterMs ?? MAX_FUTURE_MS + MINUTE_MS;
    this.maxIds = opts.maxIds ?? 2_000_000;
  }

  get ids(): number {
    return this.size;
  }

  /** The sink is the partition's only writer from `at` on (it just looked up what others stored); kept if already owned. */
  own(partition: number, at: number): void {
    if (!this.since.has(partition)) this.since.set(partition, at);
  }

  /** What the sink wrote to the partition is no longer certain (a failed insert) or no longer its own. */
  forget(partition: number): void {
    this.since.delete(partition);
    for (const [minute, parts] of this.minutes) {
      const set = parts.get(partition);
      if (!set) continue;
      this.size -= set.size;
      parts.delete(partition);
      if (parts.size === 0) this.minutes.delete(minute);
    }
  }

  clear(): void {
    this.since.clear();
    this.minutes.clear();
    this.size = 0;
  }

  /** True when the id at event time `ts` (epoch ms) is certainly not stored; false means "look it up". */
  knownNew(partition: number, id: string, ts: number): boolean {
    const since = this.since.get(partition);
    if (since === undefined || ts < since + this.trustAfterMs || ts < this.windowStart) return false;
    return !this.minutes
      .get(Math.floor(ts / MINUTE_MS))
      ?.get(partition)
      ?.has(hashOf(id));
  }

  /** Records an id the sink stored in an owned partition. */
  add(partition: number, id: string, ts: number): void {
    if (!this.since.has(partition) || ts < this.windowStart) return;
    const minute = Math.floor(ts / MINUTE_MS);
    let parts = this.minutes.get(minute);
    if (!parts) this.minutes.set(minute, (parts = new Map()));
    let set = parts.get(partition);
    if (!set) parts.set(partition, (set = new Uint32Set()));
    if (set.add(hashOf(id))) this.size++;
  }

  /** Forgets the minutes that left the window, and the oldest ones while over `maxIds`. */
  sweep(): void {
    const start = Math.floor((this.now() - this.windowMs) / MINUTE_MS) * MINUTE_MS;
    if (start > this.windowStart) this.windowStart = start;
    for (const minute of [...this.minutes.keys()].sort((a, b) => a - b)) {
      if (minute * MINUTE_MS >= this.windowStart && this.size <= this.maxIds) break;
      for (const set of this.minutes.get(minute)!.values()) this.size -= set.size;
      this.minutes.delete(minute);
      this.windowStart = Math.max(this.windowStart, (minute + 1) * MINUTE_MS);
    }
  }
}
