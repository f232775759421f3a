import { repoPath } from '../lib/paths.js';
import { readMigrations, runMigrations, type MigrationReport, type MigrationTarget } from '../lib/migrations.js';
import { rows, sql, transaction, type Db } from './client.js';

// One runner at a time per database, whatever process starts it.
const LOCK_KEY = 72_410_001;

export async function migratePostgres(db: Db, dir = repoPath('postgres', 'migrations')): Promise<MigrationReport> {
  const client = await db.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
    const target: MigrationTarget = {
      async applied() {
        await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
          version integer PRIMARY KEY,
          name text NOT NULL,
          checksum text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
        const done = await rows<{ version: number; checksum: string }>(client, sql`SELECT version, checksum FROM schema_migrations`);
        return new Map(done.map((r) => [r.version, r.checksum]));
      },
      async apply(m) {
        await transaction(db, async (tx) => {
          await tx.query(m.sql);
          await tx.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [m.version, m.name, m.checksum]);
        });
      },
    };
    return await runMigrations(target, readMigrations(dir));
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => undefined);
    client.release();
  }
}
