/**
 * Counts occurrences per key and says when a log line about them is due: at most one per key
 * every `everyMs`, carrying how many happened since the previous line. Keys not seen for a
 * whole period are forgotten, so memory follows the keys active lately.
 */
export class LogThrottle {
  private readonly keys = new Map<string, { count: number; loggedAt: number }>();

  constructor(private readonly everyMs = 60_000) {}

  /** Adds `n` for `key`; returns the count to report when a line is due now, else undefined. */
  add(key: string, n: number, now = Date.now()): number | undefined {
    let k = this.keys.get(key);
    if (!k) {
      if (this.keys.size > 10_000) this.forget(now);
      this.keys.set(key, (k = { count: 0, loggedAt: -Infinity }));
    }
    k.count += n;
    if (now - k.loggedAt < this.everyMs) return undefined;
    const count = k.count;
    k.count = 0;
    k.loggedAt = now;
    return count;
  }

  private forget(now: number): void {
    for (const [key, k] of this.keys) if (now - k.loggedAt >= this.everyMs && k.count === 0) this.keys.delete(key);
  }
}
