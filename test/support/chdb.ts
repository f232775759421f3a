import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { ChExecutor } from '../../clickhouse/migrate.js';

const require = createRequire(import.meta.url);

interface ChdbSession {
  query(sql: string, format?: string): string;
  cleanup?(): void;
}

/** Current ClickHouse in-process (chdb), to prove our DDL and queries on the modern side too. */
export function openChdb(): { engine: ChExecutor; version: string; tsv(statement: string): string; close(): void } {
  const { Session } = require('chdb') as { Session: new (path: string) => ChdbSession };
  const dir = mkdtempSync(join(tmpdir(), 'chdb-'));
  const session = new Session(dir);
  const run = (sql: string, format = 'JSONEachRow') => session.query(sql, format);
  const engine: ChExecutor = {
    async exec(statement) {
      run(statement, 'CSV');
    },
    async query<T>(statement: string) {
      return run(statement)
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as T);
    },
  };
  const version = run('SELECT version() AS v', 'JSONEachRow').trim();
  return {
    engine,
    version: (JSON.parse(version) as { v: string }).v,
    /** The answer as TabSeparated text, as the server client's `chTsvRows` receives it. */
    tsv: (statement) => run(statement, 'TabSeparated'),
    close() {
      session.cleanup?.();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
