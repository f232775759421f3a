import type { Clock } from '../../simulator/client.js';

/**
 * Real time plus whatever was waited: a wait returns at once and moves the clock on by its length,
 * so retries honour Retry-After and backoff in the clock's time without taking it in real time.
 */
export function waitlessClock(): Clock & { advance(ms: number): void } {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance(ms) {
      offset += ms;
    },
    async sleep(ms) {
      offset += ms;
      await new Promise((resolve) => setImmediate(resolve));
    },
  };
}
