import { timingSafeEqual, createHash } from 'node:crypto';
import type { Db } from '../../postgres/client.js';
import { transaction } from '../../postgres/client.js';
import { insertApiKey, insertOperator, operatorByKeyHash } from '../../postgres/queries/operators.js';
import { unauthorized } from '../../lib/errors.js';
import { API_KEY_PREFIX, generateApiKey, hashApiKey, looksLikeApiKey } from './api-keys.js';
import type { Plan } from './plans.js';

export interface Operator {
  id: string;
  plan: Plan;
  billingAnchor: Date;
}

export interface CreatedOperator {
  operator_id: string;
  api_key: string;
  api_key_prefix: string;
}

/** Constant-time comparison of digests, so neither length nor content leaks through timing. */
export function verifyAdminSecret(expected: string, given: string | undefined): void {
  if (!given) throw unauthorized('missing X-Admin-Key header');
  const a = createHash('sha256').update(expected).digest();
  const b = createHash('sha256').update(given).digest();
  if (!timingSafeEqual(a, b)) throw unauthorized('X-Admin-Key does not match the admin secret');
}

export async function createOperator(db: Db, input: { name: string; email: string; plan: Plan }): Promise<CreatedOperator> {
  const key = generateApiKey();
  const op = await transaction(db, async (tx) => {
    const row = await insertOperator(tx, input);
    await insertApiKey(tx, { operatorId: row.id, hash: key.hash, prefix: API_KEY_PREFIX, last4: key.last4 });
    return row;
  });
  return { operator_id: op.id, api_key: key.key, api_key_prefix: API_KEY_PREFIX };
}

/**
 * Resolves a bearer key to its operator. No cache: one indexed lookup per request, so a rotated
 * key is refused at once on every instance.
 */
export async function authenticate(db: Db, key: string | undefined): Promise<Operator> {
  if (!key) throw unauthorized('missing Authorization: Bearer <API_KEY> header');
  if (!looksLikeApiKey(key)) throw unauthorized('invalid API key');
  const row = await operatorByKeyHash(db, hashApiKey(key));
  if (!row) throw unauthorized('invalid or rotated API key');
  return { id: row.id, plan: row.plan, billingAnchor: row.billing_anchor };
}
