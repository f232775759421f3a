import { afterAll, describe, expect, it } from 'vitest';
import { toAppError } from '../../apps/api/middleware/errors.js';
import { createDb, transaction } from '../../postgres/client.js';
import { testConfig } from '../support/env.js';

const db = createDb(testConfig(), 2);
const killer = createDb(testConfig(), 1);
afterAll(async () => {
  await db.end();
  await killer.end();
});

describe('a Postgres connection lost in the middle of a transaction', () => {
  // Found by the chaos runner: stopping Postgres killed the api and the pipeline with an unhandled
  // 'error' event from a client checked out for a transaction.
  it('fails that transaction with a 503 and Retry-After (never a 500), does not crash the process, and the pool serves the next query', async () => {
    const attempt = transaction(db, async (client) => {
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await killer.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      await new Promise((r) => setTimeout(r, 300));
      await client.query('SELECT 1');
    });
    const err = await attempt.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeDefined();
    // Found by the full chaos run: the next query on the broken client failed with pg's "not
    // queryable" error, which the api answered with a 500.
    const answer = toAppError(err);
    expect([answer.status, answer.code, answer.headers?.['Retry-After']]).toEqual([503, 'SERVICE_UNAVAILABLE', '5']);
    await new Promise((r) => setTimeout(r, 300));
    const { rows } = await db.query<{ one: number }>('SELECT 1 AS one');
    expect(rows[0]!.one).toBe(1);
  });
});
