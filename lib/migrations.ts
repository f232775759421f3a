import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

/** Files named `NNNN_description.sql`, in version order. */
export function readMigrations(dir: string): Migration[] {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort();
  return files.map((file) => {
    const match = /^(\d+)_([\w-]+)\.sql$/.exec(file);
    if (!match) throw new Error(`migration file ${file} must be named NNNN_description.sql`);
    const sql = readFileSync(join(dir, file), 'utf8');
    return {
      version: Number(match[1]),
      name: match[2]!,
      sql,
      checksum: createHash('sha256').update(sql).digest('hex').slice(0, 16),
    };
  });
}

/** Splits a file into statements at semicolons that end a line; comments-only chunks are dropped. */
export function splitStatements(sql: string): string[] {
  return sql
    .split(/;\s*(?:\r?\n|$)/)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter(Boolean);
}

export interface MigrationTarget {
  /** Creates the ledger if missing and returns the applied versions with their checksums. */
  applied(): Promise<Map<number, string>>;
  apply(migration: Migration): Promise<void>;
}

export interface MigrationReport {
  applied: string[];
  skipped: number;
}

/** Applies pending migrations in order; refuses to go on if an applied file was edited. */
export async function runMigrations(target: MigrationTarget, migrations: Migration[]): Promise<MigrationReport> {
  const done = await target.applied();
  const report: MigrationReport = { applied: [], skipped: 0 };
  for (const m of migrations) {
    const checksum = done.get(m.version);
    if (checksum !== undefined) {
      if (checksum !== m.checksum) {
        throw new Error(
          `migration ${m.version}_${m.name} was changed after it was applied (checksum ${checksum} → ${m.checksum}); add a new migration instead`,
        );
      }
      report.skipped++;
      continue;
    }
    await target.apply(m);
    report.applied.push(`${m.version}_${m.name}`);
  }
  return report;
}
