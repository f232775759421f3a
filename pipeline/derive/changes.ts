/** What every recomputation writes (pipeline/derive/): rows versioned by time, only where they differ from the stored ones. */

/** Versions only grow, even when two recomputations fall in one millisecond. */
let lastVersion = 0;
export const nextVersion = () => (lastVersion = Math.max(Date.now(), lastVersion + 1));

/** The rows that make the stored set equal the computed one: changed or new rows, and removals. */
export function changes<T>(
  computed: T[],
  stored: T[],
  key: (t: T) => string,
  same: (a: T, b: T) => boolean,
): { upserts: T[]; removed: T[] } {
  const before = new Map(stored.map((s) => [key(s), s]));
  const upserts: T[] = [];
  for (const c of computed) {
    const k = key(c);
    const s = before.get(k);
    before.delete(k);
    if (!s || !same(s, c)) upserts.push(c);
  }
  return { upserts, removed: [...before.values()] };
}
