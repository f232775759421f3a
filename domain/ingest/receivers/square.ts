import { createHmac } from 'node:crypto';
import { configString, header, invalid, isObject, refused, safeEqual, type ConnectorEvent, type Mapped, type Receiver } from './kit.js';

/**
 * Square webhooks receiver (docs/connectors/square.md). Signature: `x-square-hmacsha256-signature`
 * = base64(HMAC-SHA256(signature key, notification URL + raw body)). `payment.created` and
 * `payment.updated` of the integration's location become square `transaction` events whose
 * `event_id` is Square's, so a re-delivery is stored once; other event types and other locations
 * are accepted and ignored.
 */

export const SQUARE_SIGNATURE_HEADER = 'x-square-hmacsha256-signature';
const PAYMENT_TYPES = new Set(['payment.created', 'payment.updated']);

export function squareSignature(signatureKey: string, notificationUrl: string, rawBody: string): string {
  return createHmac('sha256', signatureKey)
    .update(notificationUrl + rawBody)
    .digest('base64');
}

export function mapSquare(body: unknown, locationId: string | undefined): Mapped {
  if (!isObject(body)) throw invalid('the Square notification must be a JSON object', 'body', 'expected an object');
  const { type, event_id, created_at, data } = body;
  if (typeof type !== 'string' || type === '') throw invalid('the Square notification has no type', 'type', 'required');
  if (typeof event_id !== 'string' || event_id === '') throw invalid('the Square notification has no event_id', 'event_id', 'required');
  if (!PAYMENT_TYPES.has(type)) return { events: [], ignored: 1, ignoredWhy: 'not a payment.created or payment.updated notification' };
  const payment = isObject(data) && isObject(data.object) ? data.object.payment : undefined;
  if (!isObject(payment))
    throw invalid('the Square payment notification has no data.object.payment', 'data.object.payment', 'expected an object');
  if (locationId !== undefined && payment.location_id !== locationId)
    return { events: [], ignored: 1, ignoredWhy: "another location than the integration's location_id" };
  const payload: Record<string, unknown> = { event_id, event_type: type };
  if (payment.id !== undefined) payload.payment_id = payment.id;
  for (const field of ['amount_money', 'status', 'location_id', 'customer_id'] as const) {
    if (payment[field] !== undefined && payment[field] !== null) payload[field] = payment[field];
  }
  const event: ConnectorEvent = { type: 'transaction', timestamp: created_at, payload, event_id };
  return { events: [event], ignored: 0 };
}

export const squareReceiver: Receiver = {
  connector: 'square',
  verify(config, req) {
    const key = configString(config, 'webhook_signature_key');
    const url = configString(config, 'notification_url');
    if (!key || !url)
      throw refused(
        'this Square integration has no webhook_signature_key and notification_url: set both from the Square Developer Dashboard webhook subscription',
      );
    const given = header(req, SQUARE_SIGNATURE_HEADER);
    if (!given) throw refused(`the ${SQUARE_SIGNATURE_HEADER} header is missing`);
    if (!safeEqual(given.trim(), squareSignature(key, url, req.rawBody))) {
      throw refused(
        `the ${SQUARE_SIGNATURE_HEADER} header does not match: check the integration's webhook_signature_key and that notification_url is exactly the URL in Square's subscription`,
      );
    }
  },
  map: (body, config) => mapSquare(body, configString(config, 'location_id')),
};
