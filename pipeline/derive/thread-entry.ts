import { parentPort, workerData } from 'node:worker_threads';
import { createCh } from '../../clickhouse/client.js';
import type { Config } from '../../lib/config.js';
import { createLogger } from '../../lib/logger.js';
import { createDb } from '../../postgres/client.js';
import { startDeriveJob } from './job.js';
import type { ToDerive, FromDerive } from './thread.js';

/**
 * The derive job inside its thread (thread.ts): its own ClickHouse and Postgres clients, the
 * job's counts sent to the starting thread every second and after each round asked for.
 */
const port = parentPort!;
const { cfg, name } = workerData as { cfg: Config; name?: string };
const log = createLogger('pipeline', cfg.LOG_LEVEL).child({ thread: 'derive' });
const ch = createCh(cfg, cfg.CLICKHOUSE_DATABASE, { log });
// The leader's lock holds one connection; the round's look-ups take another.
const db = createDb(cfg, 3, log);
const job = startDeriveJob({ ch, db, log, intervalMs: cfg.DERIVE_INTERVAL_MS, roundBudgetMs: cfg.DERIVE_ROUND_BUDGET_MS, name });
const send = (m: FromDerive) => port.postMessage(m);
const counts = setInterval(() => send({ type: 'stats', stats: job.stats }), 1000);

port.on('message', (m: ToDerive) => {
  if (m.type === 'round') void job.runOnce().then(() => send({ type: 'round-done', stats: job.stats }));
  if (m.type === 'stop') void stop();
});

async function stop() {
  clearInterval(counts);
  await job.stop();
  send({ type: 'stats', stats: job.stats });
  await Promise.all([
    ch.close().catch((err: unknown) => log.warn({ err }, 'derive thread: closing ClickHouse failed')),
    db.end().catch((err: unknown) => log.warn({ err }, 'derive thread: closing Postgres failed')),
  ]);
  port.close();
}
