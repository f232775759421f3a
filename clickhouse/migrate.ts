import { repoPath } from '../lib/paths.js';
import { readMigrations, runMigrations, splitStatements, type MigrationReport, type MigrationTarget } from '../lib/migrations.js';
import { chExec, chRows, chsql, raw } from './client.js';
import type { Ch } from './client.js';

export const CLICKHOUSE_MIGRATIONS = repoPath('clickhouse', 'migrations');

/** Executes one statement on some ClickHouse engine (the server over HTTP, or chdb in tests). */
export type ChExecutor = {
  exec(statement: string): Promise<void>;
  query<T>(statement: string): Promise<T[]>;
};

export function serverExecutor(ch: Ch): ChExecutor {
  return {
    exec: (s) => chExec(ch, s),
    query: <T>(s: string) => chRows<T>(ch, raw(s)),
  };
}

/**
 * 18.16 has no `ADD COLUMN IF NOT EXISTS`. A file re-run after a crash between its ALTER and the
 * ledger insert would fail on the existing column, so such a statement is skipped when
 * system.columns already lists the column.
 */
async function columnAlreadyAdded(engine: ChExecutor, statement: string): Promise<boolean> {
  const m = /^ALTER\s+TABLE\s+(\w+)\.(\w+)\s+ADD\s+COLUMN\s+(\w+)/i.exec(statement);
  if (!m) return false;
  const [, database, table, column] = m;
  const found = await engine.query<{ n: number | string }>(
    chsql`SELECT count() AS n FROM system.columns WHERE database = ${database} AND table = ${table} AND name = ${column}`.text,
  );
  return Number(found[0]?.n ?? 0) > 0;
}

/**
 * Applies the ClickHouse migrations to `database`. Statements are idempotent DDL (IF NOT EXISTS,
 * or an ADD COLUMN checked first), so a file interrupted half-way is simply re-run.
 */
export async function migrateClickhouse(engine: ChExecutor, database: string, dir = CLICKHOUSE_MIGRATIONS): Promise<MigrationReport> {
  const db = raw(database);
  await engine.exec(`CREATE DATABASE IF NOT EXISTS ${database}`);
  const target: MigrationTarget = {
    async applied() {
      await engine.exec(
        chsql`CREATE TABLE IF NOT EXISTS ${db}.schema_migrations (version UInt32, name String, checksum String, applied_at DateTime('UTC')) ENGINE = MergeTree ORDER BY version`.text,
      );
      const done = await engine.query<{ version: number | string; checksum: string }>(
        chsql`SELECT version, checksum FROM ${db}.schema_migrations`.text,
      );
      return new Map(done.map((r) => [Number(r.version), r.checksum]));
    },
    async apply(m) {
      for (const statement of splitStatements(m.sql.replaceAll('{db}', database))) {
        if (await columnAlreadyAdded(engine, statement)) continue;
        await engine.exec(statement);
      }
      await engine.exec(
        chsql`INSERT INTO ${db}.schema_migrations (version, name, checksum, applied_at) VALUES (${m.version}, ${m.name}, ${m.checksum}, now())`.text,
      );
    },
  };
  return runMigrations(target, readMigrations(dir));
}
