/**
 * Values kept for `ttlMs` after they were loaded, at most `max` of them: past it the oldest goes
 * first. A stale entry is dropped when it is next asked for, so memory follows the keys asked for
 * lately (bounded by `max`).
 */
export class TtlCache<K, V> {
  private readonly entries = new Map<K, { at: number; value: V }>();
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
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value as K);
    this.entries.set(key, { at, value });
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
