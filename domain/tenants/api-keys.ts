import { createHash, randomInt } from 'node:crypto';

/** Every key starts with this; the spec's `api_key_prefix`. */
export const API_KEY_PREFIX = 'vt_live_';
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const RANDOM_LENGTH = 28;
const KEY_PATTERN = new RegExp(`^${API_KEY_PREFIX}[A-Za-z0-9]{${RANDOM_LENGTH}}$`);

export interface NewApiKey {
  key: string;
  hash: Buffer;
  last4: string;
}

/** 28 characters from a CSPRNG (about 167 bits), so a fast digest is enough to store it safely. */
export function generateApiKey(): NewApiKey {
  let random = '';
  for (let i = 0; i < RANDOM_LENGTH; i++) random += ALPHABET[randomInt(ALPHABET.length)];
  const key = API_KEY_PREFIX + random;
  return { key, hash: hashApiKey(key), last4: random.slice(-4) };
}

export const hashApiKey = (key: string): Buffer => createHash('sha256').update(key).digest();

export const looksLikeApiKey = (value: string): boolean => KEY_PATTERN.test(value);
