/**
 * How a derive round shares its time between operators (docs/processors.md#derived-from-the-raw-table).
 * The next piece of work always goes to the operator that has used the least time this round, so an
 * operator whose periods are expensive (a backfill of last month, a venue with a very busy day) gets
 * the same time as the others, not the same number of periods. Once the round has run for
 * `budgetMs`, it starts nothing more, except each operator's first piece: every operator with new
 * events moves on every round, however large another's backlog. Once `stopped()` (the process is
 * shutting down), it starts nothing more at all. What is left is returned, for the caller to carry
 * over to the next round.
 */
export async function runFairly<T>(
  queues: ReadonlyMap<string, readonly T[]>,
  budgetMs: number,
  run: (item: T) => Promise<void>,
  { clock = () => performance.now(), stopped = () => false }: { clock?: () => number; stopped?: () => boolean } = {},
): Promise<T[]> {
  const left = [...queues.values()].map((q) => ({ items: [...q], spent: 0, ran: false }));
  const started = clock();
  for (;;) {
    let next: { items: T[]; spent: number; ran: boolean } | undefined;
    for (const q of left) if (q.items.length > 0 && (!next || q.spent < next.spent || (!q.ran && next.ran))) next = q;
    if (!next) return [];
    // The least-served operator has had its turn already: so has every other one with work left.
    if (stopped() || (next.ran && clock() - started >= budgetMs)) return left.flatMap((q) => q.items);
    const item = next.items.shift()!;
    const t0 = clock();
    try {
      await run(item);
    } finally {
      next.spent += clock() - t0;
      next.ran = true;
    }
  }
}
