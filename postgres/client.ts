import pg from 'pg';
import type { Config } from '../lib/config.js';
import type { Logger } from '../lib/logger.js';

export type Db = pg.Pool;
export type Queryable = pg.Pool | pg.PoolClient;

/** A parameterised statement; built only by `sql`, so values never reach the SQL text. */
export interface Statement {
  text: string;
  values: unknown[];
}

/** Tagged template: `sql\`SELECT * FROM venues WHERE id = ${id}\`` → `$1` placeholders. */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): Statement {
  let text = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) text += `$${i + 1}` + (strings[i + 1] ?? '');
  return { text, values };
}

// int8 (counts) as numbers and numeric as numbers: our counts stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));

export function createDb(cfg: Config, max = 10, log?: Logger): Db {
  const pool = new pg.Pool({ connectionString: cfg.DATABASE_URL, max, connectionTimeoutMillis: 3000, idleTimeoutMillis: 30000 });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', (err) => log?.warn({ err }, 'postgres: idle connection lost; the pool replaces it'));
  return pool;
}

export async function rows<T>(db: Queryable, stmt: Statement): Promise<T[]> {
  const result = await db.query(stmt.text, stmt.values);
  return result.rows as T[];
}

export async function one<T>(db: Queryable, stmt: Statement): Promise<T | undefined> {
  return (await rows<T>(db, stmt))[0];
}

/** Runs a statement for its effect; returns the affected row count. */
export async function exec(db: Queryable, stmt: Statement): Promise<number> {
  return (await db.query(stmt.text, stmt.values)).rowCount ?? 0;
}

export async function transaction<T>(db: Db, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect();
  // A checked-out client has no 'error' listener of the pool's: a connection lost mid-transaction
  // (Postgres restarting) would be an unhandled 'error' event and kill the process. The failing
  // query rejects anyway; the broken client is destroyed on release instead of going back to the pool.
  let lost: Error | undefined;
  const onError = (err: Error) => {
    lost = err;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    if (!lost) await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.removeListener('error', onError);
    client.release(lost);
  }
}
