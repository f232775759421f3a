/**
 * Small timing helpers for loops that wait, retry and give up: an abortable sleep, exponential
 * backoff and jitter. Nothing here knows what is being waited for.
 */

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** `baseMs` doubled for each failure after the first, at most `maxMs` (failures ≤ 0: 0). */
export function backoffMs(failures: number, baseMs: number, maxMs: number): number {
  if (failures <= 0) return 0;
  return Math.min(maxMs, baseMs * 2 ** Math.min(failures - 1, 30));
}

/** `ms` spread by ± `fraction` of itself, so many timers started together drift apart. */
export function jittered(ms: number, fraction = 0.1, random: () => number = Math.random): number {
  return Math.max(0, Math.round(ms * (1 + fraction * (2 * random() - 1))));
}
