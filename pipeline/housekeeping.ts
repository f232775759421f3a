import type { Ch } from '../clickhouse/client.js';
import type { Logger } from '../lib/logger.js';
import { compactClosedPartitions } from './compaction.js';
import { dropExpiredPartitions } from './retention.js';

const HOUR_MS = 3_600_000;

/**
 * The pipeline's ClickHouse housekeeping, at start and then every `everyMs` (hourly): drops the
 * partitions past their retention window, then compacts the closed ones of the rollups. `ch`
 * should allow long statements (a compaction waits for its merge); stop() does not wait for one.
 */
export function scheduleHousekeeping(ch: Ch, log: Logger, everyMs = HOUR_MS): { stop(): Promise<void> } {
  const rlog = log.child({ component: 'retention' });
  const clog = log.child({ component: 'compaction' });
  const stopping = new AbortController();
  let running: Promise<unknown> = Promise.resolve();
  const run = () => {
    running = (async () => {
      await dropExpiredPartitions(ch, rlog).catch((err: Error) => rlog.error({ err: err.message }, 'retention run failed; retried next hour'));
      if (stopping.signal.aborted) return;
      await compactClosedPartitions(ch, clog, { signal: stopping.signal }).catch((err: Error) =>
        clog.error({ err: err.message }, 'compaction run failed; retried next hour'),
      );
    })();
  };
  run();
  const timer = setInterval(run, everyMs);
  return {
    async stop() {
      clearInterval(timer);
      // A merge in hand is not waited for: it could outlast the shutdown budget.
      stopping.abort();
      await running;
    },
  };
}
