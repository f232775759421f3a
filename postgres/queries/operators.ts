import { exec, one, sql, type Queryable } from '../client.js';
import type { Plan } from '../../domain/tenants/plans.js';

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

export async function insertApiKey(db: Queryable, k: { operatorId: string; hash: Buffer; prefix: string; last4: string }): Promise<void> {
  await exec(db, sql`INSERT INTO api_keys (operator_id, key_hash, key_prefix, last4) VALUES (${k.operatorId}, ${k.hash}, ${k.prefix}, ${k.last4})`);
}

/** The operator owning a live (not rotated) key. */
export async function operatorByKeyHash(db: Queryable, hash: Buffer): Promise<OperatorRow | undefined> {
  return one<OperatorRow>(
    db,
    sql`SELECT o.id, o.name, o.email, o.plan, o.billing_anchor, o.created_at
          FROM api_keys k JOIN operators o ON o.id = k.operator_id
         WHERE k.key_hash = ${hash} AND k.revoked_at IS NULL`,
  );
}
