import { createCh, type Ch } from '../../clickhouse/client.js';
import { migrateClickhouse, serverExecutor } from '../../clickhouse/migrate.js';
import { repoPath } from '../../lib/paths.js';
import { RoundWrites } from '../../pipeline/derive/writes.js';
import { benchConfig, cpuSecondsOf, enginePids } from './harness.js';

export interface ScratchClickhouse {
  ch: Ch;
  /** The ClickHouse server's CPU seconds so far (from /proc): its merges included. */
  clickhouseCpu(): number;
  /** Drops the database and closes the clients. */
  close(): Promise<void>;
}

/** A freshly migrated database of a bench's own on the local stack (started when down), so nothing else writes it. */
export async function scratchClickhouse(database: string): Promise<ScratchClickhouse> {
  const { up } = (await import(repoPath('scripts', 'stack.mjs'))) as { up: (o: { quiet: boolean }) => Promise<unknown> };
  await up({ quiet: true });
  const { cfg } = benchConfig({ CLICKHOUSE_DATABASE: database });
  const admin = createCh(cfg, null, { requestTimeoutMs: 600_000 });
  await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
  await migrateClickhouse(serverExecutor(admin), database);
  const ch = createCh(cfg, database, { requestTimeoutMs: 600_000 });
  return {
    ch,
    clickhouseCpu: () => cpuSecondsOf({ clickhouse: enginePids().clickhouse }).clickhouse!,
    async close() {
      await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
      await ch.close();
      await admin.close();
    },
  };
}

/** Recomputations of `items` in turn, written as one derive round writes them (pipeline/derive/writes.ts). */
export async function deriveRound<T>(
  ch: Ch,
  items: readonly T[],
  recompute: (item: T, out: RoundWrites) => Promise<unknown>,
): Promise<void> {
  const out = new RoundWrites(ch);
  for (const item of items) {
    await recompute(item, out);
    await out.flushIfFull();
  }
  await out.flush();
}
