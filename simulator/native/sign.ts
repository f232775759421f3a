import { createHmac, randomBytes } from 'node:crypto';

/**
 * How each vendor authenticates its deliveries, done the vendor's way (../shared/reference/connectors.md):
 * - Meraki: no header; the POST body carries the network's `secret` (and a GET answers the validator).
 * - Verkada: `Verkada-Signature: <unix ts>|<hex HMAC-SHA256(secret, rawBody + "|" + ts)>`, signed at
 *   send time (receivers refuse stale timestamps), so every retry is signed afresh.
 * - Square: `x-square-hmacsha256-signature: base64(HMAC-SHA256(key, notification_url + rawBody))`.
 * - Density: a header the customer chose, with the value the customer chose.
 */

export const VERKADA_SIGNATURE_HEADER = 'verkada-signature';
export const SQUARE_SIGNATURE_HEADER = 'x-square-hmacsha256-signature';

export function verkadaSignature(secret: string, rawBody: string, unixSeconds: number): string {
  const hex = createHmac('sha256', secret).update(`${rawBody}|${unixSeconds}`).digest('hex');
  return `${unixSeconds}|${hex}`;
}

export function squareSignature(signatureKey: string, notificationUrl: string, rawBody: string): string {
  return createHmac('sha256', signatureKey)
    .update(notificationUrl + rawBody)
    .digest('base64');
}

/** A random secret of `bytes` bytes, URL-safe (what the simulator registers in a native run). */
export const newSecret = (bytes = 24): string => randomBytes(bytes).toString('base64url');

/** Letters and digits only (Meraki's validator is 40 hex digits in practice). */
export const newValidator = (): string => randomBytes(20).toString('hex');
