import { AppError } from '../../../lib/errors.js';
import { canonicalMac } from '../pseudonyms.js';
import { configString, invalid, isObject, refused, safeEqual, sha256Hex, type ConnectorEvent, type Mapped, type Receiver } from './kit.js';

/**
 * Cisco Meraki Scanning API receiver (docs/connectors/meraki.md). Meraki first sends `GET` and
 * expects the network's validator as the plain body; every `POST` carries the shared `secret` in
 * its body (no HMAC header). v2 (`version` 2.x) posts once per AP per minute and radio type, v3
 * (3.x) once per network per minute. Each observation becomes one meraki `device_seen`; the same
 * client seen by several APs in one minute gets the same `event_id` (radio, SHA-256 of the MAC,
 * minute), so it is stored once. Client IPs and `userId` are never read (personal data).
 */

const V2_TYPES: Record<string, 'WiFi' | 'BLE'> = { DevicesSeen: 'WiFi', BluetoothDevicesSeen: 'BLE' };
const V3_TYPES: Record<string, 'WiFi' | 'BLE' | 'Bluetooth'> = { WiFi: 'WiFi', BLE: 'BLE', Bluetooth: 'Bluetooth' };

const text = (v: unknown): string | null | undefined => (typeof v === 'string' || v === null ? v : undefined);
const finite = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** `{lat, lng, unc?}` when the vendor gave finite coordinates; Meraki's x/y arrays and floor plans are not kept. */
function location(raw: unknown): { lat: number; lng: number; unc?: number } | undefined {
  if (!isObject(raw)) return undefined;
  const lat = finite(raw.lat);
  const lng = finite(raw.lng);
  if (lat === undefined || lng === undefined) return undefined;
  const unc = finite(raw.unc);
  return unc === undefined || unc < 0 ? { lat, lng } : { lat, lng, unc };
}

/**
 * The delivery's dedupe key for one device: radio class (BLE and Bluetooth are one), SHA-256 of the
 * canonical MAC, and the minute of the sighting. Only used inside ingest's keyed HMAC, never stored.
 */
export function sightingId(radio: string, clientMac: unknown, time: unknown): string | undefined {
  const mac = typeof clientMac === 'string' ? canonicalMac(clientMac) : undefined;
  const ms = typeof time === 'string' ? Date.parse(time) : NaN;
  if (!mac || Number.isNaN(ms)) return undefined;
  return `meraki:${radio === 'WiFi' ? 'wifi' : 'ble'}:${sha256Hex(mac).slice(0, 32)}:${Math.floor(ms / 60_000)}`;
}

function observationEvent(o: unknown, radio: 'WiFi' | 'BLE' | 'Bluetooth', v3: boolean, apMacV2: unknown): ConnectorEvent {
  if (!isObject(o)) return { type: 'device_seen', timestamp: undefined, payload: {} };
  const payload: Record<string, unknown> = { radio };
  if (o.clientMac !== undefined) payload.clientMac = o.clientMac;
  for (const field of ['ssid', 'os', 'manufacturer'] as const) {
    const v = text(o[field]);
    if (v !== undefined) payload[field] = v;
  }
  let timestamp: unknown;
  let loc: ReturnType<typeof location>;
  if (v3) {
    const latest = isObject(o.latestRecord) ? o.latestRecord : {};
    timestamp = latest.time;
    if (typeof latest.nearestApMac === 'string') payload.apMac = latest.nearestApMac;
    if (finite(latest.nearestApRssi) !== undefined) payload.rssi = latest.nearestApRssi;
    // `locations` is often empty; when given, the last record with coordinates.
    const records = Array.isArray(o.locations) ? o.locations : [];
    for (let i = records.length - 1; i >= 0 && !loc; i--) loc = location(records[i]);
  } else {
    timestamp = typeof o.seenTime === 'string' ? o.seenTime : undefined;
    if (timestamp === undefined && finite(o.seenEpoch) !== undefined) timestamp = new Date((o.seenEpoch as number) * 1000).toISOString();
    if (typeof apMacV2 === 'string') payload.apMac = apMacV2;
    if (finite(o.rssi) !== undefined) payload.rssi = o.rssi;
    if (Number.isInteger(o.seenEpoch) && (o.seenEpoch as number) >= 0) payload.seenEpoch = o.seenEpoch;
    loc = location(o.location);
  }
  if (loc) payload.location = loc;
  const id = sightingId(radio, o.clientMac, timestamp);
  return id ? { type: 'device_seen', timestamp, payload, event_id: id } : { type: 'device_seen', timestamp, payload };
}

/** A v2 or v3 Scanning API post → one `device_seen` per observation, duplicates of one sighting in the post dropped. */
export function mapMeraki(body: unknown): Mapped {
  if (!isObject(body)) throw invalid('the Meraki post must be a JSON object', 'body', 'expected an object');
  const { version, type, data } = body;
  if (typeof version !== 'string' || !/^[23]\.\d+$/.test(version)) {
    throw invalid('unsupported Meraki Scanning API version: expected "2.0", "2.1" or "3.0"', 'version', 'expected 2.x or 3.x');
  }
  const v3 = version.startsWith('3.');
  const radios: Record<string, string> = v3 ? V3_TYPES : V2_TYPES;
  const radio = typeof type === 'string' && Object.hasOwn(radios, type) ? (radios[type] as 'WiFi' | 'BLE' | 'Bluetooth') : undefined;
  if (!radio)
    throw invalid(
      `unknown Meraki ${version} post type: expected ${Object.keys(radios).join(' or ')}`,
      'type',
      `expected one of ${Object.keys(radios).join(', ')}`,
    );
  if (!isObject(data)) throw invalid('the Meraki post has no data object', 'data', 'expected an object');
  if (!Array.isArray(data.observations))
    throw invalid('the Meraki post has no observations array', 'data.observations', 'expected an array');
  const events: ConnectorEvent[] = [];
  const seen = new Set<string>();
  let ignored = 0;
  for (const o of data.observations) {
    const e = observationEvent(o, radio, v3, data.apMac);
    if (e.event_id !== undefined) {
      if (seen.has(e.event_id)) {
        ignored++;
        continue;
      }
      seen.add(e.event_id);
    }
    events.push(e);
  }
  return ignored > 0 ? { events, ignored, ignoredWhy: 'same client and minute twice in one post' } : { events, ignored };
}

export const merakiReceiver: Receiver = {
  connector: 'meraki',
  answerGet(config) {
    const validator = configString(config, 'validator');
    if (!validator) {
      throw new AppError(
        404,
        'NOT_FOUND',
        "this Meraki integration has no validator: copy the validator shown on Meraki's Network-wide > General > Location and scanning page into the integration's config.validator",
      );
    }
    return validator;
  },
  verify(config, _req, json) {
    const secret = configString(config, 'webhook_secret');
    if (!secret) {
      throw refused(
        "this Meraki integration has no webhook_secret: set config.webhook_secret to the secret entered on Meraki's Location and scanning page",
      );
    }
    const body = json();
    if (!isObject(body)) throw invalid('the Meraki post must be a JSON object', 'body', 'expected an object');
    if (typeof body.secret !== 'string' || body.secret === '')
      throw refused('the Meraki post has no "secret" field: set the shared secret on Meraki\'s Location and scanning page');
    if (!safeEqual(body.secret, secret))
      throw refused('the "secret" field of the Meraki post does not match this integration\'s webhook_secret');
  },
  map: (body) => mapMeraki(body),
};
