import { createRequire } from 'node:module';

/** kafkajs's wait before it checks a queue held back by its in-flight limit again (its own CHECK_PENDING_REQUESTS_INTERVAL). */
const CHECK_PENDING_MS = 10;

interface RequestQueue {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

/**
 * Stops kafkajs 2.2.4 from spinning on a 1 ms timer for every broker connection (tulios/kafkajs
 * #1556, #1704; no release carries the fix). Its request queue re-arms a check after every check,
 * and with nothing pending and no throttle the delay it computes is negative, so each connection
 * wakes its process about a thousand times a second for as long as it is open: an idle edge spent
 * 7 % of a core on it (benchmarks/README.md, "kafkajs's idle loop"). Here a check is scheduled only
 * when a request waits: until the broker's throttle ends, or kafkajs's 10 ms while the in-flight
 * limit holds it. A queue with nothing waiting needs no timer: `push` sends or enqueues (and
 * schedules) a new request, and every answer checks the queue again.
 * Returns false when kafkajs no longer has the method (a release that changed the queue).
 */
export function stopRequestQueueSpin(): boolean {
  const RequestQueue = createRequire(import.meta.url)('kafkajs/src/network/requestQueue/index.js') as {
    prototype: RequestQueue;
  };
  const proto = RequestQueue.prototype;
  if (typeof proto.scheduleCheckPendingRequests !== 'function' || typeof proto.checkPendingRequests !== 'function') return false;
  proto.scheduleCheckPendingRequests = function (this: RequestQueue) {
    if (this.throttleCheckTimeoutId || this.pending.length === 0) return;
    const untilUnthrottled = this.throttledUntil - Date.now();
    this.throttleCheckTimeoutId = setTimeout(
      () => {
        this.throttleCheckTimeoutId = null;
        this.checkPendingRequests();
      },
      untilUnthrottled > 0 ? untilUnthrottled : CHECK_PENDING_MS,
    );
  };
  return true;
}
