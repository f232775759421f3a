import { createHash } from 'node:crypto';
import { AppError, conflict } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import type { Db } from '../../postgres/client.js';
import {
  claimIdempotencyKey,
  purgeIdempotencyKeys,
  recordIdempotentAnswer,
  releaseIdempotencyKey,
} from '../../postgres/queries/idempotency.js';

/** How long an answer is replayed for its key (docs/events.md). */
export const IDEMPOTENCY_WINDOW_S = 24 * 3600;
/** A key left in flight longer than this (its instance died) may be taken over. */
const IN_FLIGHT_STALE_S = 60;

/** A body's hash: a text as it came, anything else as JSON. */
export const bodyHash = (body: unknown): Buffer =>
  createHash('sha256')
    .update(typeof body === 'string' ? body : JSON.stringify(body))
    .digest();

export interface Idempotent<T> {
  result: T;
  /** True when this is the stored answer of an earlier request with the same key and body. */
  replayed: boolean;
}

/**
 * Runs `fn` at most once per (operator, key) within the window: a retry with the same body gets
 * the first answer again (nothing is published twice); the same key with another body is a 409;
 * while the first request is still in flight, a 409 with Retry-After. A failed request (an error,
 * e.g. 503) gives the key back, so its retry is processed afresh.
 */
export async function oncePerKey<T>(
  db: Db,
  log: Logger,
  operatorId: string,
  key: string,
  body: unknown,
  fn: () => Promise<T>,
): Promise<Idempotent<T>> {
  const hash = bodyHash(body);
  const claim = await claimIdempotencyKey(db, operatorId, key, hash, IDEMPOTENCY_WINDOW_S, IN_FLIGHT_STALE_S);
  if (claim.state !== 'claimed') {
    if (!claim.bodyHash.equals(hash)) {
      throw conflict('CONFLICT', 'this Idempotency-Key was already used with a different body; use a new key for a new batch', {
        header: 'Idempotency-Key',
      });
    }
    if (claim.state === 'in-flight') {
      throw new AppError(
        409,
        'CONFLICT',
        'a request with this Idempotency-Key is still being processed; retry after Retry-After',
        { header: 'Idempotency-Key' },
        { 'Retry-After': '1' },
      );
    }
    return { result: claim.response as T, replayed: true };
  }
  let result: T;
  try {
    result = await fn();
  } catch (err) {
    await releaseIdempotencyKey(db, operatorId, key).catch((err: unknown) =>
      log.warn({ err }, 'could not release an idempotency key; it is taken over once stale'),
    );
    throw err;
  }
  await recordIdempotentAnswer(db, operatorId, key, result);
  // Keys are few per request; purging this operator's expired ones now and then keeps the table small.
  if (Math.random() < 0.01)
    await purgeIdempotencyKeys(db, operatorId, IDEMPOTENCY_WINDOW_S).catch((err: unknown) =>
      log.warn({ err }, 'idempotency purge failed; retried later'),
    );
  return { result, replayed: false };
}
