import { createHmac } from 'node:crypto';
import {
  configString,
  eventIdFrom,
  header,
  invalid,
  isObject,
  isoFromEpochSeconds,
  refused,
  safeEqual,
  type ConnectorEvent,
  type Mapped,
  type Receiver,
} from './kit.js';

/**
 * Verkada webhooks receiver (docs/connectors/verkada.md). Signature header
 * `Verkada-Signature: <timestamp>|<hex>`, hex = HMAC-SHA256(secret, rawBody + "|" + timestamp); a
 * timestamp more than 60 s from the server clock is refused (a replay). Verkada pushes no people
 * counts (they are polled, docs/connectors/polling.md): `sensor_alert` webhooks whose reading is a
 * telemetry metric become verkada `environment` events; every other webhook type is accepted and
 * ignored.
 */

export const VERKADA_SIGNATURE_HEADER = 'verkada-signature';
export const VERKADA_MAX_SKEW_S = 60;

/** Verkada's sensor readings → the environment field they feed (the rest have no telemetry key). */
const READINGS: Record<string, 'temperature' | 'humidity' | 'co2' | 'noise'> = {
  temperature: 'temperature',
  calibrated_temperature: 'temperature',
  humidity: 'humidity',
  co2: 'co2',
  noise: 'noise',
  noise_level: 'noise',
};

export function verkadaSignature(secret: string, rawBody: string, timestamp: string): string {
  return createHmac('sha256', secret).update(`${rawBody}|${timestamp}`).digest('hex');
}

export function mapVerkada(body: unknown): Mapped {
  if (!isObject(body)) throw invalid('the Verkada webhook must be a JSON object', 'body', 'expected an object');
  const { webhook_type, webhook_id, created_at, data } = body;
  if (typeof webhook_type !== 'string' || webhook_type === '')
    throw invalid('the Verkada webhook has no webhook_type', 'webhook_type', 'required');
  if (webhook_type !== 'sensor_alert') return { events: [], ignored: 1, ignoredWhy: 'a webhook type without telemetry' };
  if (!isObject(data)) throw invalid('the Verkada sensor_alert has no data object', 'data', 'expected an object');
  if (typeof data.reading !== 'string') throw invalid('the Verkada sensor_alert has no data.reading', 'data.reading', 'required');
  const field = Object.hasOwn(READINGS, data.reading) ? READINGS[data.reading] : undefined;
  if (!field) return { events: [], ignored: 1, ignoredWhy: 'a sensor reading without a telemetry key' };
  if (typeof data.most_extreme_value !== 'number')
    throw invalid('the Verkada sensor_alert has no numeric data.most_extreme_value', 'data.most_extreme_value', 'expected a number');
  const payload: Record<string, unknown> = { [field]: data.most_extreme_value };
  if (typeof data.device_id === 'string') payload.device_id = data.device_id;
  const timestamp = isoFromEpochSeconds(created_at) ?? isoFromEpochSeconds(data.start_time) ?? created_at;
  const event: ConnectorEvent = {
    type: 'environment',
    timestamp,
    payload,
    event_id: eventIdFrom('verkada', [
      webhook_type,
      typeof webhook_id === 'string' ? webhook_id : undefined,
      typeof data.alert_event_id === 'string' ? data.alert_event_id : undefined,
      String(created_at),
    ]),
  };
  return { events: [event], ignored: 0 };
}

export const verkadaReceiver: Receiver = {
  connector: 'verkada',
  verify(config, req) {
    const secret = configString(config, 'webhook_secret');
    if (!secret)
      throw refused(
        'this Verkada integration has no webhook_secret: set config.webhook_secret to the shared secret of the webhook in Verkada Command',
      );
    const given = header(req, VERKADA_SIGNATURE_HEADER);
    if (!given) throw refused('the Verkada-Signature header is missing');
    const match = /^\s*(\d{1,12})\|([0-9a-fA-F]+)\s*$/.exec(given);
    if (!match) throw refused('the Verkada-Signature header is malformed: expected <timestamp>|<hex HMAC-SHA256>');
    const [, timestamp, hex] = match as unknown as [string, string, string];
    const skew = Math.abs(req.now / 1000 - Number(timestamp));
    if (skew > VERKADA_MAX_SKEW_S) {
      throw refused(
        `the Verkada-Signature timestamp is ${Math.round(skew)} s away from the server clock; at most ${VERKADA_MAX_SKEW_S} s is allowed (a replayed or delayed delivery)`,
      );
    }
    if (!safeEqual(hex.toLowerCase(), verkadaSignature(secret, req.rawBody, timestamp))) {
      throw refused("the Verkada-Signature header does not match: check the integration's webhook_secret");
    }
  },
  map: (body) => mapVerkada(body),
};
