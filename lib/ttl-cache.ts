/**
 * Values kept for `ttlMs` after they were loaded, at most `max` of them: past it the oldest goes
 * first. A stale entry is dropped when it is next asked for, so memory follows the keys asked for
 * lately (bounded by `max`).
 */
export class TtlCache<K, V> {
  private readonly entries = new Map<K, { at: number; value: V }>();
  /**
   * The entries in the order they were set, from `head` on (those since replaced or dropped are
   * skipped): the oldest is found here, not by `entries.keys().next()`, which steps over every entry
   * deleted since the Map last rehashed (6.6 µs a set once 10,000 entries were full, 40 µs at 100,000).
   */
  private order: Array<{ key: K; entry: { at: number; value: V } }> = [];
  private head = 0;
  private readonly loading = new Map<K, Promise<V>>();
  private readonly ttlMs: number;
  private readonly max: number;
  private readonly now: () => number;

  constructor(opts: { ttlMs: number; max?: number; now?: () => number }) {
    this.ttlMs = opts.ttlMs;
    this.max = opts.max ?? Infinity;
    this.now = opts.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value while fresh (`now` being when it is asked for), else undefined. */
  get(key: K, now = this.now()): V | undefined {
    return this.fresh(key, now)?.value;
  }

  /** Keeps `value` from `at` (now by default), the newest entry. */
  set(key: K, value: V, at = this.now()): void {
    this.entries.delete(key);
    if (this.entries.size >= this.max) this.evictOldest();
    const entry = { at, value };
    this.entries.set(key, entry);
    this.order.push({ key, entry });
    // Replaced and dropped entries leave their place behind: rebuilt from the live ones, once there are as many of them.
    if (this.order.length - this.head > 2 * this.entries.size + 16) {
      this.order = [...this.entries].map(([k, e]) => ({ key: k, entry: e }));
      this.head = 0;
    }
  }

  private evictOldest(): void {
    for (; this.head < this.order.length; this.head++) {
      const { key, entry } = this.order[this.head]!;
      if (this.entries.get(key) !== entry) continue;
      this.entries.delete(key);
      this.head++;
      break;
    }
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
  }

  /** Forgets the value, and a load in hand for it (its result is not kept). */
  delete(key: K): void {
    this.entries.delete(key);
    this.loading.delete(key);
  }

  /**
   * The fresh value, else `load`'s: calls for a key already loading share that load, and its value
   * counts as fresh from when the load started. A failed load is not kept (the next call retries).
   */
  getOrLoad(key: K, load: (key: K) => Promise<V>): Promise<V> {
    const now = this.now();
    const hit = this.fresh(key, now);
    if (hit) return Promise.resolve(hit.value);
    const pending = this.loading.get(key);
    if (pending) return pending;
    const loaded = load(key).then(
      (value) => {
        if (this.loading.get(key) === loaded) {
          this.loading.delete(key);
          this.set(key, value, now);
        }
        return value;
      },
      (err: unknown) => {
        if (this.loading.get(key) === loaded) this.loading.delete(key);
        throw err;
      },
    );
    this.loading.set(key, loaded);
    return loaded;
  }

  private fresh(key: K, now: number): { at: number; value: V } | undefined {
    const hit = this.entries.get(key);
    if (!hit || now - hit.at < this.ttlMs) return hit;
    this.entries.delete(key);
    return undefined;
  }
}
