import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Config } from './config.js';

/**
 * AES-256-GCM envelopes for secrets at rest. Each envelope names the key it was sealed with
 * (`kid`), so keys can rotate: new values are sealed with the current key, older envelopes still
 * open with a previous key until they are re-sealed. A caller-chosen `context` (e.g. row id + field
 * name) is bound in as additional authenticated data, so an envelope opens only where it was sealed.
 */
export interface Envelope {
  v: 1;
  kid: string;
  /** Base64 of a random 12-byte nonce, fresh for every value. */
  iv: string;
  /** Base64 of the 16-byte GCM authentication tag. */
  tag: string;
  /** Base64 ciphertext. */
  ct: string;
}

export interface SealingKey {
  keyId: string;
  key: Buffer;
}

export interface Keyring {
  /** Seals every new value. */
  current: SealingKey;
  /** Every key that may open an envelope, by id (the current one included). */
  keys: Record<string, Buffer>;
}

export class SecretBoxError extends Error {
  override name = 'SecretBoxError';
}

const aad = (kid: string, context: string) => Buffer.from(`v1\u0000${kid}\u0000${context}`, 'utf8');

function checkKey(key: Buffer): void {
  if (key.length !== 32) throw new SecretBoxError('AES-256-GCM needs a 32-byte key');
}

export function seal(plaintext: string, key: SealingKey, context: string): Envelope {
  checkKey(key.key);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key.key, iv);
  cipher.setAAD(aad(key.keyId, context));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return { v: 1, kid: key.keyId, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), ct: ct.toString('base64') };
}

/** Throws SecretBoxError when the key is unknown or the envelope, its key id or its context were altered. */
export function open(envelope: Envelope, keys: Record<string, Buffer>, context: string): string {
  if (envelope?.v !== 1) throw new SecretBoxError('unsupported envelope version');
  if (![envelope.kid, envelope.iv, envelope.tag, envelope.ct].every((part) => typeof part === 'string')) {
    throw new SecretBoxError('malformed envelope');
  }
  const key = Object.hasOwn(keys, envelope.kid) ? keys[envelope.kid] : undefined;
  if (!key) throw new SecretBoxError(`no key with id "${envelope.kid}" is configured (SECRETS_KEY_ID / SECRETS_PREVIOUS_KEYS)`);
  checkKey(key);
  const iv = Buffer.from(envelope.iv, 'base64');
  const tag = Buffer.from(envelope.tag, 'base64');
  if (iv.length !== 12 || tag.length !== 16) throw new SecretBoxError('malformed envelope');
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: 16 });
    decipher.setAAD(aad(envelope.kid, context));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(Buffer.from(envelope.ct, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    throw new SecretBoxError('envelope failed authentication (tampered, moved or wrong key)');
  }
}

export function keyringFromConfig(cfg: Pick<Config, 'SECRETS_KEY' | 'SECRETS_KEY_ID' | 'SECRETS_PREVIOUS_KEYS'>): Keyring {
  const current = { keyId: cfg.SECRETS_KEY_ID, key: Buffer.from(cfg.SECRETS_KEY, 'base64') };
  return { current, keys: { ...cfg.SECRETS_PREVIOUS_KEYS, [current.keyId]: current.key } };
}
