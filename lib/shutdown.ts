import type { Logger } from './logger.js';

/**
 * Runs the steps in order on SIGTERM/SIGINT (stop accepting, drain, commit, close), once;
 * a second signal or the timeout forces the exit.
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
      try {
        await step();
        log.debug({ step: name }, 'shutdown step done');
      } catch (err) {
        log.error({ err, step: name }, 'shutdown step failed');
      }
    }
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void run('SIGTERM'));
  process.on('SIGINT', () => void run('SIGINT'));
}
