import { exec, one, sql, type Queryable } from '../client.js';

export type Claim =
  { state: 'claimed' } | { state: 'answered'; bodyHash: Buffer; response: unknown } | { state: 'in-flight'; bodyHash: Buffer };

/**
 * Claims (operator, key) for a new request, in one statement: a row older than the window, or left
 * in flight for longer than `staleSeconds` by an instance that died, is taken over. Otherwise the
 * existing row tells what the first request left.
 */
export async function claimIdempotencyKey(
  db: Queryable,
  operatorId: string,
  key: string,
  bodyHash: Buffer,
  windowSeconds: number,
  staleSeconds: number,
): Promise<Claim> {
  const claimed = await one<{ claimed: boolean }>(
    db,
    sql`INSERT INTO ingest_idempotency (operator_id, key, body_hash) VALUES (${operatorId}, ${key}, ${bodyHash})
        ON CONFLICT (operator_id, key) DO UPDATE SET body_hash = EXCLUDED.body_hash, response = NULL, created_at = now()
         WHERE ingest_idempotency.created_at < now() - make_interval(secs => ${windowSeconds})
            OR (ingest_idempotency.response IS NULL AND ingest_idempotency.created_at < now() - make_interval(secs => ${staleSeconds}))
        RETURNING true AS claimed`,
  );
  if (claimed) return { state: 'claimed' };
  const row = await one<{ body_hash: Buffer; response: unknown }>(
    db,
    sql`SELECT body_hash, response FROM ingest_idempotency WHERE operator_id = ${operatorId} AND key = ${key}`,
  );
  // Released between the two statements: the caller may simply try again.
  if (!row) return claimIdempotencyKey(db, operatorId, key, bodyHash, windowSeconds, staleSeconds);
  return row.response === null
    ? { state: 'in-flight', bodyHash: row.body_hash }
    : { state: 'answered', bodyHash: row.body_hash, response: row.response };
}

export async function recordIdempotentAnswer(db: Queryable, operatorId: string, key: string, response: unknown): Promise<void> {
  await exec(
    db,
    sql`UPDATE ingest_idempotency SET response = ${JSON.stringify(response)}::jsonb WHERE operator_id = ${operatorId} AND key = ${key}`,
  );
}

/** Gives a key back after a failed request, so a retry is processed afresh. */
export async function releaseIdempotencyKey(db: Queryable, operatorId: string, key: string): Promise<void> {
  await exec(db, sql`DELETE FROM ingest_idempotency WHERE operator_id = ${operatorId} AND key = ${key} AND response IS NULL`);
}

/** Forgets the operator's keys older than the window (run now and then, so the table stays small). */
export async function purgeIdempotencyKeys(db: Queryable, operatorId: string, windowSeconds: number): Promise<number> {
  return exec(
    db,
    sql`DELETE FROM ingest_idempotency WHERE operator_id = ${operatorId} AND created_at < now() - make_interval(secs => ${windowSeconds})`,
  );
}
