import type { GeneratedEvent } from '../traffic/index.js';
import type { Delivery, TranslateContext, Translated } from './types.js';

/**
 * Meraki Scanning API posts from the generator's `device_seen` events (one observation each):
 * - live, v2: one `DevicesSeen` post per AP per minute (`data.apMac`, the zone slug as the AP's tag);
 * - live, v3: one `WiFi` post per network per minute, each observation with its `latestRecord`
 *   (time, nearest AP, RSSI in dBm) and `locations: []` as real v3 traffic mostly has;
 * - history (before `liveFrom`), whatever the venue's version: large v3 posts of up to 1,000
 *   observations spanning many minutes, each with its own `latestRecord.time`, so a day of history
 *   fits the receiver's 600 requests a minute.
 * The model has Wi-Fi radios only, so no `BluetoothDevicesSeen` / `BLE` posts. MT sensor readings
 * (`environment`) have no Scanning API form: they, the heartbeats and fault twins stay on /ingest.
 */

export const MAX_OBSERVATIONS = 1000;
const MINUTE = 60_000;
/** Meraki's v2 RSSI is an SNR-like positive number over a noise floor of about -95 dBm. */
const NOISE_FLOOR_DBM = -95;

type Payload = Record<string, unknown>;

export const merakiNetworkId = (venueKey: string) => `N_sim${venueKey.replace(/[^a-z]/g, '')}`;

export function merakiTranslate(events: GeneratedEvent[], ctx: TranslateContext): Translated {
  const seen: GeneratedEvent[] = [];
  const ingest: GeneratedEvent[] = [];
  for (const e of events) (!e.malformed && e.event.type === 'device_seen' ? seen : ingest).push(e);
  const history = seen.filter((e) => e.ts < ctx.liveFrom);
  const live = seen.filter((e) => e.ts >= ctx.liveFrom);
  const deliveries: Delivery[] = [];
  for (let i = 0; i < history.length; i += MAX_OBSERVATIONS) deliveries.push(v3Post(history.slice(i, i + MAX_OBSERVATIONS), ctx));
  if ((ctx.link.merakiVersion ?? 2) === 2) {
    for (const group of groupBy(live, (e) => `${Math.floor(e.ts / MINUTE)}|${String(e.event.payload.apMac)}`))
      deliveries.push(v2Post(group, ctx));
  } else {
    for (const group of groupBy(live, (e) => String(Math.floor(e.ts / MINUTE)))) {
      for (let i = 0; i < group.length; i += MAX_OBSERVATIONS) deliveries.push(v3Post(group.slice(i, i + MAX_OBSERVATIONS), ctx));
    }
  }
  return { deliveries, ingest };
}

/** Groups in order of first appearance (events are in time order, so posts are too). */
function groupBy<T>(items: T[], key: (t: T) => string): T[][] {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const g = groups.get(k);
    if (g) g.push(item);
    else groups.set(k, [item]);
  }
  return [...groups.values()];
}

const secretOf = (ctx: TranslateContext) => String(ctx.link.config.webhook_secret ?? '');

function v2Post(group: GeneratedEvent[], ctx: TranslateContext): Delivery {
  const first = group[0]!.event.payload;
  const post = {
    version: '2.0',
    secret: secretOf(ctx),
    type: 'DevicesSeen',
    data: {
      apMac: first.apMac,
      apTags: typeof first.zone === 'string' ? [first.zone] : [],
      apFloors: [],
      observations: group.map((e) => {
        const p = e.event.payload;
        const loc = (p.location ?? {}) as Payload;
        return {
          clientMac: p.clientMac,
          ipv4: null,
          ipv6: null,
          seenTime: new Date(e.ts).toISOString(),
          seenEpoch: Math.floor(e.ts / 1000),
          ssid: p.ssid ?? null,
          os: p.os ?? null,
          manufacturer: p.manufacturer ?? null,
          rssi: p.rssi,
          location: { lat: loc.lat, lng: loc.lng, unc: loc.unc, x: [], y: [] },
        };
      }),
    },
  };
  return delivery(post, group.length, 'meraki v2 DevicesSeen', ctx);
}

function v3Post(group: GeneratedEvent[], ctx: TranslateContext): Delivery {
  const post = {
    version: '3.0',
    secret: secretOf(ctx),
    type: 'WiFi',
    data: {
      networkId: merakiNetworkId(ctx.venue.key),
      observations: group.map((e) => {
        const p = e.event.payload;
        return {
          clientMac: p.clientMac,
          ipv4: null,
          ipv6: null,
          ssid: p.ssid ?? null,
          os: p.os ?? null,
          manufacturer: p.manufacturer ?? null,
          latestRecord: { time: new Date(e.ts).toISOString(), nearestApMac: p.apMac, nearestApRssi: Number(p.rssi) + NOISE_FLOOR_DBM },
          locations: [],
        };
      }),
    },
  };
  return delivery(post, group.length, 'meraki v3 WiFi', ctx);
}

function delivery(post: unknown, events: number, kind: string, ctx: TranslateContext): Delivery {
  return { integrationId: ctx.link.integrationId, connector: 'meraki', body: JSON.stringify(post), headers: () => ({}), events, kind };
}
