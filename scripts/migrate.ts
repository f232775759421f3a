import { cliArgs } from '../lib/cli.js';
import { configOrExit } from '../lib/config.js';
import { createLogger } from '../lib/logger.js';
import { createDb } from '../postgres/client.js';
import { migratePostgres } from '../postgres/migrate.js';
import { createCh } from '../clickhouse/client.js';
import { migrateClickhouse, serverExecutor } from '../clickhouse/migrate.js';

/** `npm run migrate`: applies pending Postgres and ClickHouse migrations; safe to re-run. */
cliArgs('npm run migrate --', 'Applies pending Postgres and ClickHouse migrations; safe to re-run.', { options: {} });
const cfg = configOrExit();
const log = createLogger('migrate', cfg.LOG_LEVEL);
const db = createDb(cfg, 2);
// A migration that rebuilds a table (0007) copies all its rows in one statement: minutes on a large
// deployment, far beyond the service's 30 s statement limit.
const ch = createCh(cfg, null, { requestTimeoutMs: 3_600_000, log });
try {
  const pg = await migratePostgres(db);
  log.info({ applied: pg.applied, alreadyApplied: pg.skipped }, 'postgres migrations');
  const chReport = await migrateClickhouse(serverExecutor(ch), cfg.CLICKHOUSE_DATABASE);
  log.info({ applied: chReport.applied, alreadyApplied: chReport.skipped }, 'clickhouse migrations');
} catch (err) {
  log.fatal({ err }, 'migration failed');
  process.exitCode = 1;
} finally {
  await db.end();
  await ch.close();
}
