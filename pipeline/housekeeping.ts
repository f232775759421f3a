import { createCh, type Ch } from '../clickhouse/client.js';
import type { Config } from '../lib/config.js';
import type { Logger } from '../lib/logger.js';
import { every } from '../lib/timers.js';
import { compactClosedPartitions } from './compaction.js';
import { dropExpiredPartitions } from './retention.js';

const HOUR_MS = 3_600_000;

/**
 * The housekeeping's own client: a compaction waits for its merge, far longer than the sinks' 30 s
 * statement limit.
 */
export function createHousekeepingCh(cfg: Config, log: Logger, database = cfg.CLICKHOUSE_DATABASE): Ch {
  return createCh(cfg, database, { requestTimeoutMs: 600_000, log });
}

export type HousekeepingAction = 'dropped' | 'compacted';

/**
 * The pipeline's ClickHouse housekeeping, at start and then every `everyMs` (hourly): drops the
 * partitions past their retention window, then compacts the closed ones of the rollups. `ch`
 * comes from createHousekeepingCh; stop() does not wait for a merge in hand.
 * `onPartition` hears of each partition dropped or compacted (metrics).
 */
export function scheduleHousekeeping(
  ch: Ch,
  log: Logger,
  {
    everyMs = HOUR_MS,
    onPartition = () => undefined,
  }: { everyMs?: number; onPartition?: (action: HousekeepingAction, table: string) => void } = {},
): { stop(): Promise<void> } {
  const rlog = log.child({ component: 'retention' });
  const clog = log.child({ component: 'compaction' });
  const stopping = new AbortController();
  const run = async () => {
    const dropped = await dropExpiredPartitions(ch, rlog).catch((err: unknown) => {
      rlog.error({ err }, 'retention run failed; retried next hour');
      return [];
    });
    for (const d of dropped) onPartition('dropped', d.table);
    if (stopping.signal.aborted) return;
    const compacted = await compactClosedPartitions(ch, clog, { signal: stopping.signal }).catch((err: unknown) => {
      clog.error({ err }, 'compaction run failed; retried next hour');
      return [];
    });
    for (const c of compacted) onPartition('compacted', c.table);
  };
  // A run of many merges can outlast the interval: the ticks it covers are skipped.
  const job = every(everyMs, run, {
    immediate: true,
    fromStart: true,
    onError: (err) => log.error({ err }, 'housekeeping run failed; retried next hour'),
  });
  return {
    async stop() {
      // A merge in hand is not waited for: it could outlast the shutdown budget.
      stopping.abort();
      await job.stop();
    },
  };
}
