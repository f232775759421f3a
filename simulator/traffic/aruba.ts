import { Random } from '../random.js';
import { event, type Generator } from './types.js';
import { apMac, sightingsIn } from './wifi.js';

/** HPE Aruba (Central presence/location): one `device_seen` per record, RSSI in dBm, floor-plan coordinates. */
export const aruba: Generator = (w, venue, state) =>
  sightingsIn(w, venue, state, { passers: true, associatedOnly: false }).map((s) => {
    const rng = Random.for(state.seed, venue.key, 'aruba', s.key, s.ts);
    return event(s.ts, 'device_seen', {
      sta_eth_mac: s.device.mac,
      associated: s.associated,
      ap_name: `AP-${(s.zone ?? 'street').toUpperCase()}-${rng.int(1, 3)}`,
      radio_mac: apMac(state, venue, s.zone),
      rssi: Math.max(-95, Math.min(-30, Math.round(-92 + 50 * s.strength + rng.normal(0, 2)))),
      sta_location_x: Math.round(rng.between(0, 60) * 100) / 100,
      sta_location_y: Math.round(rng.between(0, 35) * 100) / 100,
      error_level: Math.round(rng.between(1, 12)),
      campus_id: `campus-${venue.key}`,
      building_id: `building-${venue.key}-1`,
      floor_id: `floor-${venue.key}-g`,
      ...(s.zone ? { zone: s.zone } : {}),
    });
  });
