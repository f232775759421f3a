import type { Logger } from './logger.js';

/**
 * Runs the steps in order on SIGTERM/SIGINT (stop accepting, drain, commit, close), once;
 * a second signal or the timeout forces the exit. Each step is logged as it starts and ends (with
 * its duration) or fails; a failed step does not stop the next.
 */
export function onShutdown(log: Logger, timeoutMs: number, steps: Array<[string, () => Promise<unknown> | unknown]>): void {
  let stopping = false;
  const run = async (signal: string) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      log.error({ timeoutMs }, 'shutdown timed out; exiting');
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    for (const [name, step] of steps) {
      // Each step's start is logged, so a shutdown that hangs or times out shows where.
      log.info({ step: name }, 'shutdown step started');
      const started = performance.now();
      try {
        await step();
        log.info({ step: name, ms: Math.round(performance.now() - started) }, 'shutdown step done');
      } catch (err) {
        log.error({ err, step: name, ms: Math.round(performance.now() - started) }, 'shutdown step failed');
      }
    }
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void run('SIGTERM'));
  process.on('SIGINT', () => void run('SIGINT'));
}
