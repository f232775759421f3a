import { timingSafeEqual, createHash } from 'node:crypto';
import type { Db, Queryable } from '../../postgres/client.js';
import { transaction } from '../../postgres/client.js';
import {
  apiKeysOf,
  insertApiKey,
  insertOperator,
  keyOwnerByHash,
  liveKeyHashes,
  lockOperator,
  revokeLiveKeys,
  updatePlan,
} from '../../postgres/queries/operators.js';
import { notFound, unauthorized } from '../../lib/errors.js';
import { API_KEY_PREFIX, generateApiKey, hashApiKey, looksLikeApiKey } from './api-keys.js';
import { PLAN_LIMITS, type Plan } from './plans.js';

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

export interface RotatedKey {
  operator_id: string;
  api_key: string;
  api_key_prefix: string;
  /** When the previous key stopped working (the same instant the new one was issued). */
  rotated_at: string;
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
  const row = await keyOwnerByHash(db, hashApiKey(key));
  if (!row) throw unauthorized('invalid API key');
  if (row.revoked_at) throw unauthorized('this API key has been rotated; use the current key');
  return { id: row.id, plan: row.plan, billingAnchor: row.billing_anchor };
}

/**
 * For long-lived sessions authenticated once (WebSocket connections): which of these key hashes
 * (from `hashApiKey`) still belong to live keys, in one indexed lookup. A hash missing from the
 * answer was rotated (or never existed) and its sessions must end.
 */
export async function stillLiveKeys(db: Db, hashes: Buffer[]): Promise<Set<string>> {
  if (hashes.length === 0) return new Set();
  return new Set((await liveKeyHashes(db, hashes)).map((h) => h.toString('hex')));
}

/**
 * Replaces the operator's key in one transaction: the operator row is locked first so concurrent
 * rotations queue, every live key is revoked, one new key is issued. Nothing is cached anywhere,
 * so the old key fails on every instance as soon as this commits.
 */
async function replaceKey(tx: Queryable, operatorId: string, presentedHash?: Buffer): Promise<RotatedKey> {
  if (!(await lockOperator(tx, operatorId))) throw notFound('operator');
  const revoked = await revokeLiveKeys(tx, operatorId);
  // A concurrent rotation with the same key won the lock: this one must not mint a second key.
  if (presentedHash && !revoked.some((h) => h.equals(presentedHash))) {
    throw unauthorized('this API key has been rotated; use the current key');
  }
  const key = generateApiKey();
  const issuedAt = await insertApiKey(tx, { operatorId, hash: key.hash, prefix: API_KEY_PREFIX, last4: key.last4 });
  return { operator_id: operatorId, api_key: key.key, api_key_prefix: API_KEY_PREFIX, rotated_at: issuedAt.toISOString() };
}

/** Self-service rotation with the key being replaced. */
export async function rotateOwnKey(db: Db, operatorId: string, presentedKey: string): Promise<RotatedKey> {
  return transaction(db, (tx) => replaceKey(tx, operatorId, hashApiKey(presentedKey)));
}

/** Admin rotation, for an operator who lost its key. */
export async function rotateKeyAsAdmin(db: Db, operatorId: string): Promise<RotatedKey> {
  return transaction(db, (tx) => replaceKey(tx, operatorId));
}

export interface ApiKeyInfo {
  id: string;
  api_key_prefix: string;
  last4: string;
  created_at: string;
  revoked_at: string | null;
}

/** Key metadata for the operator's own audit: the key itself cannot be shown again. */
export async function listApiKeys(db: Db, operatorId: string, limit: number): Promise<ApiKeyInfo[]> {
  return (await apiKeysOf(db, operatorId, limit)).map((k) => ({
    id: k.id,
    api_key_prefix: k.key_prefix,
    last4: k.last4,
    created_at: k.created_at.toISOString(),
    revoked_at: k.revoked_at ? k.revoked_at.toISOString() : null,
  }));
}

/** Admin-only: the one way to reach Enterprise, or to move an operator between plans. */
export async function changePlan(db: Db, operatorId: string, plan: Plan): Promise<{ operator_id: string; plan: Plan; plan_name: string }> {
  if (!(await updatePlan(db, operatorId, plan))) throw notFound('operator');
  return { operator_id: operatorId, plan, plan_name: PLAN_LIMITS[plan].label };
}
