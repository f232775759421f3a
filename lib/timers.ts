/**
 * Small timing helpers for loops that wait, retry and give up: an abortable sleep, exponential
 * backoff, jitter, a repeating job and a deadline on a promise. Nothing here knows what is being
 * waited for.
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

export interface EveryOptions {
  /** Hears of a run that threw; the next run is still scheduled. */
  onError: (err: unknown) => void;
  /** Runs once at once instead of waiting `ms` first. */
  immediate?: boolean;
  /**
   * Counts each interval from the previous run's start, as setInterval does (a run longer than the
   * interval skips the ticks it covered); by default the next run starts `ms` after one ends.
   */
  fromStart?: boolean;
  /** The pause before the next run, asked after each run (a job with work left can come back at once); `ms` when absent. */
  pause?: () => number;
}

/**
 * Runs `work` every `ms` until stopped. Runs never overlap: the next is scheduled only once the one
 * in hand has ended. `stop()` cancels the next run and waits for the one in hand.
 */
export function every(ms: number, work: () => Promise<unknown> | unknown, opts: EveryOptions): { stop(): Promise<void> } {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const run = () => {
    timer = undefined;
    const started = Date.now();
    running = (async () => {
      try {
        await work();
      } catch (err) {
        opts.onError(err);
      }
    })().finally(() => {
      running = undefined;
      if (!stopped) schedule(opts.pause ? opts.pause() : opts.fromStart ? ms - ((Date.now() - started) % ms) : ms);
    });
  };
  const schedule = (delayMs: number) => {
    timer = setTimeout(run, delayMs);
  };
  if (opts.immediate) run();
  else schedule(ms);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

/** A promise that took longer than its deadline (withTimeout). */
export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';

  constructor(
    message: string,
    readonly ms: number,
  ) {
    super(message);
  }
}

/**
 * `work`'s outcome, or a rejection once `ms` have passed: a TimeoutError saying `no answer from
 * <what> within <ms> ms` (`no answer within <ms> ms` without `what`), or the error `what` makes
 * when it is a function (it also learns of the timeout). The timer is cleared either way; `work`
 * itself is not cancelled.
 */
export async function withTimeout<T>(work: Promise<T>, ms: number, what?: string | (() => Error)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      if (typeof what === 'function') return reject(what());
      reject(new TimeoutError(`no answer${what ? ` from ${what}` : ''} within ${ms} ms`, ms));
    }, ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
