/**
 * Waits, if needed, so at least `seconds` remain in the current epoch minute. The rate limits count
 * in fixed windows aligned to the minute: a test that counts up to a limit must not span an edge,
 * or the count starts again half-way.
 */
export async function freshWindow(seconds = 10): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < seconds * 1000) await new Promise((r) => setTimeout(r, left + 50));
}
