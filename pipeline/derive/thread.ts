import type { Config } from '../../lib/config.js';
import type { Logger } from '../../lib/logger.js';
import { startThread } from '../../lib/thread.js';
import { noDeriveStats, type DeriveStats, type RunningDerive } from './job.js';

/**
 * The derive job in a thread of its own (thread-entry.ts). A round folds the sightings of
 * thousands of devices and parses result sets of megabytes, work that ran for hundreds of
 * milliseconds between two awaits on the pipeline's event loop; while it ran, the consumers on
 * that loop (the sink, the processors) fetched and committed nothing, and every group the process
 * owns fell behind by as much. In its thread it has its own loop and its own heap: its garbage is
 * not collected in the consumers' pauses (benchmarks/README.md, "The derive job in a thread").
 */

export type ToDerive = { type: 'round' } | { type: 'stop' };
export type FromDerive = { type: 'stats'; stats: DeriveStats } | { type: 'round-done'; stats: DeriveStats };

/** A thread that ended by itself (a crash) is started again after this long. */
const RESTART_MS = 5_000;

export interface DeriveThreadOptions {
  /** The progress row's name (tests). */
  name?: string;
  /** How long after a thread ended by itself the next one starts (RESTART_MS; tests shorten it). */
  restartMs?: number;
}

export function startDeriveThread(cfg: Config, log: Logger, opts: DeriveThreadOptions = {}): RunningDerive {
  const restartMs = opts.restartMs ?? RESTART_MS;
  const stats = noDeriveStats();
  /** Counts of the threads that ended before this one: a restarted thread counts from zero. */
  const before = { rounds: 0, failures: 0, periods: 0, rowsWritten: 0, visitPeriods: 0, occupancyPeriods: 0, carriedPeriods: 0 };
  const summed = Object.keys(before) as Array<keyof typeof before>;
  const waiting: Array<() => void> = [];
  let stopping = false;
  let restart: NodeJS.Timeout | undefined;

  const take = (s: DeriveStats) => {
    Object.assign(stats, s);
    for (const k of summed) stats[k] = before[k] + s[k];
  };

  const start = () => {
    const thread = startThread(new URL('./thread-entry.js', import.meta.url), { cfg, name: opts.name });
    thread.on('message', (m: FromDerive) => {
      take(m.stats);
      if (m.type === 'round-done') waiting.shift()?.();
    });
    thread.on('error', (err) => log.error({ err }, 'derive thread: uncaught error; the thread ends'));
    const ended = new Promise<void>((resolve) =>
      thread.once('exit', (code) => {
        current.alive = false;
        for (const k of summed) before[k] = stats[k];
        stats.leading = false;
        // A round asked for and not done is not waited on forever.
        for (const done of waiting.splice(0)) done();
        if (!stopping) {
          stats.failures++;
          before.failures++;
          log.error({ code, restartMs }, 'derive thread: ended by itself; starting it again');
          restart = setTimeout(() => {
            current = start();
          }, restartMs);
        }
        resolve();
      }),
    );
    return { thread, ended, alive: true };
  };
  let current: ReturnType<typeof start> = start();

  return {
    stats,
    runOnce() {
      return new Promise<void>((resolve) => {
        // Between a crash and the restart there is no round to run.
        if (!current.alive) return resolve();
        waiting.push(resolve);
        current.thread.postMessage({ type: 'round' } satisfies ToDerive);
      });
    },
    async stop() {
      stopping = true;
      clearTimeout(restart);
      current.thread.postMessage({ type: 'stop' } satisfies ToDerive);
      await current.ended;
    },
  };
}
