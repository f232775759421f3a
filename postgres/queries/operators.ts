import { exec, one, rows, sql, type Queryable } from '../client.js';
import type { Plan } from '../../lib/plans.js';

export interface OperatorRow {
  id: string;
  name: string;
  email: string;
  plan: Plan;
  billing_anchor: Date;
  created_at: Date;
}

export async function insertOperator(db: Queryable, o: { name: string; email: string; plan: Plan }): Promise<OperatorRow> {
  return (await one<OperatorRow>(
    db,
    sql`INSERT INTO operators (name, email, plan) VALUES (${o.name}, ${o.email}, ${o.plan})
        RETURNING id, name, email, plan, billing_anchor, created_at`,
  ))!;
}

/** Returns the new key's creation time (the transaction's `now()`). */
export async function insertApiKey(db: Queryable, k: { operatorId: string; hash: Buffer; prefix: string; last4: string }): Promise<Date> {
  const row = await one<{ created_at: Date }>(
    db,
    sql`INSERT INTO api_keys (operator_id, key_hash, key_prefix, last4) VALUES (${k.operatorId}, ${k.hash}, ${k.prefix}, ${k.last4})
        RETURNING created_at`,
  );
  return row!.created_at;
}

export interface KeyOwnerRow {
  id: string;
  plan: Plan;
  billing_anchor: Date;
  /** Set once the key has been rotated: such a key is refused. */
  revoked_at: Date | null;
}

/** The operator a key belongs to, live or rotated (one lookup on the unique key_hash index). */
export async function keyOwnerByHash(db: Queryable, hash: Buffer): Promise<KeyOwnerRow | undefined> {
  return one<KeyOwnerRow>(
    db,
    sql`SELECT o.id, o.plan, o.billing_anchor, k.revoked_at
          FROM api_keys k JOIN operators o ON o.id = k.operator_id
         WHERE k.key_hash = ${hash}`,
  );
}

/** Of the given key hashes, those of keys that are still live (not rotated). */
export async function liveKeyHashes(db: Queryable, hashes: Buffer[]): Promise<Buffer[]> {
  const live = await rows<{ key_hash: Buffer }>(
    db,
    sql`SELECT key_hash FROM api_keys WHERE key_hash = ANY(${hashes}::bytea[]) AND revoked_at IS NULL`,
  );
  return live.map((r) => r.key_hash);
}

/** Locks the operator row so concurrent key rotations or plan changes for one operator run one at a time. */
export async function lockOperator(db: Queryable, operatorId: string): Promise<boolean> {
  return (await exec(db, sql`SELECT 1 FROM operators WHERE id = ${operatorId} FOR UPDATE`)) === 1;
}

/** Revokes every live key of the operator; returns the revoked keys' hashes. */
export async function revokeLiveKeys(db: Queryable, operatorId: string): Promise<Buffer[]> {
  const revoked = await rows<{ key_hash: Buffer }>(
    db,
    sql`UPDATE api_keys SET revoked_at = now() WHERE operator_id = ${operatorId} AND revoked_at IS NULL RETURNING key_hash`,
  );
  return revoked.map((r) => r.key_hash);
}

export interface ApiKeyRow {
  id: string;
  key_prefix: string;
  last4: string;
  created_at: Date;
  revoked_at: Date | null;
}

/** The operator's keys, newest first (metadata only: the key itself is never stored). */
export async function apiKeysOf(db: Queryable, operatorId: string, limit: number): Promise<ApiKeyRow[]> {
  return rows<ApiKeyRow>(
    db,
    sql`SELECT id, key_prefix, last4, created_at, revoked_at FROM api_keys
         WHERE operator_id = ${operatorId} ORDER BY created_at DESC, id LIMIT ${limit}`,
  );
}

export async function updatePlan(db: Queryable, operatorId: string, plan: Plan): Promise<boolean> {
  return (await exec(db, sql`UPDATE operators SET plan = ${plan}, updated_at = now() WHERE id = ${operatorId}`)) === 1;
}
