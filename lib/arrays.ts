/**
 * `items.map(fn)` for arrays that may hold more than 16,382 elements. TurboFan inlines
 * Array.prototype.map with its result preallocated at the input's length, and deoptimizes when
 * that length is over the largest array it allocates inline: each large call throws the
 * optimized caller away, which is compiled again on the next small ones, again and again
 * (benchmarks/README.md, "A deoptimization loop in the sink's insert"). Grown by push, the result
 * needs no such bound.
 */
export function mapLarge<T, U>(items: readonly T[], fn: (item: T) => U): U[] {
  const out: U[] = [];
  for (const item of items) out.push(fn(item));
  return out;
}
