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
 * Applies the ClickHouse migrations to `database`. Statements are idempotent DDL
 * (IF NOT EXISTS), so a file interrupted half-way is simply re-run.
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
      for (const statement of splitStatements(m.sql.replaceAll('{db}', database))) await engine.exec(statement);
      await engine.exec(
        chsql`INSERT INTO ${db}.schema_migrations (version, name, checksum, applied_at) VALUES (${m.version}, ${m.name}, ${m.checksum}, now())`.text,
      );
    },
  };
  return runMigrations(target, readMigrations(dir));
}
