import { Random } from '../random.js';
import { areaZones } from '../venues.js';
import { environmentAt } from './environment.js';
import { event, grid, plansIn, type GeneratedEvent, type Generator } from './types.js';
import { apMac, sightingsIn } from './wifi.js';

const ENV_STEP = 5 * 60_000;

/**
 * Cisco Meraki: Scanning API observations flattened to one `device_seen` each (v2 fields: RSSI as
 * a positive SNR-like number, `ssid` null when not associated), and MT sensor `environment`
 * readings every 5 minutes per area zone, day and night.
 */
export const meraki: Generator = (w, venue, state) => {
  const out: GeneratedEvent[] = [];
  for (const s of sightingsIn(w, venue, state, { passers: true, associatedOnly: false })) {
    const rng = Random.for(state.seed, venue.key, 'meraki', s.key, s.ts);
    out.push(
      event(s.ts, 'device_seen', {
        clientMac: s.device.mac.toUpperCase(),
        apMac: apMac(state, venue, s.zone),
        ssid: s.associated ? venue.ssid : null,
        rssi: Math.round(8 + 52 * s.strength + rng.normal(0, 2)),
        os: s.device.os,
        manufacturer: s.device.manufacturer,
        radio: 'WiFi',
        seenEpoch: Math.floor(s.ts / 1000),
        location: {
          lat: venue.lat + rng.normal(0, 0.0001),
          lng: venue.lng + rng.normal(0, 0.0001),
          unc: Math.round(rng.between(3, 25) * 10) / 10,
        },
        ...(s.zone ? { zone: s.zone } : {}),
      }),
    );
  }
  const plans = plansIn({ from: w.from - 86_400_000, to: w.to + 86_400_000 }, venue, state);
  for (const ts of grid(w, ENV_STEP)) {
    for (const [i, zone] of areaZones(venue).entries()) {
      const r = environmentAt(state, venue, plans, zone, ts);
      out.push(
        event(ts, 'environment', {
          serial: `Q3CA-SIM${i}-${venue.key.slice(0, 4).toUpperCase()}`,
          temperature: r.temperature,
          humidity: r.humidity,
          co2: r.co2,
          noise: r.noise,
          zone: zone.slug,
        }),
      );
    }
  }
  return out;
};
